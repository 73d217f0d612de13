"""What a report says first: what its study is for, and for a comparison (`bench compare`) a table ranking the
methods compared against each baseline.

The purpose is the study's own words: the leading comment of its study file (config/*.yaml whose ``study:`` is
the results folder's name, or the study.yaml `bench compare` writes beside its runs). The ranking is written to
DIR/ranking.md too, which `bench compare` prints on the terminal once the pipeline has finished (bench never
imports analysis: it reads the file).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import yaml

from analysis.display import as_percent
from analysis.labels import compressor_label, method_label
from analysis.report_html import md_code, md_text
from analysis.tables import AVERAGED, LOCAL, has_local
from analysis.tta import summarize_seeds

CONFIG = Path(__file__).resolve().parents[1] / "config"
OWN_STUDY = "study.yaml"  # what `bench compare` writes beside a comparison's runs
RANKING = "ranking.md"

# what a time-to-accuracy crossing is read on, in words
TTA_METRICS = {"test_acc": "`test_acc`, the averaged model's test accuracy",
               "local_test_acc_mean": "`local_test_acc_mean`, the local models' test accuracy averaged over "
                                      "workers (the paper's metric; a sample of workers between evaluations "
                                      "where a study asked for fewer)"}


def _listing(values) -> str:
    """Sorted distinct values, each as text (a name never becomes markup): numbers as numbers (8, 9, 16, 36),
    names alphabetically, numbers first."""
    def key(v):
        return (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v))
    return ", ".join(md_text(v) for v in sorted(set(values), key=key))


def what_was_run(summary: pd.DataFrame) -> str:
    statuses = ", ".join(f"{n} {md_text(s)}" for s, n in summary["status"].value_counts().sort_index().items())
    methods = _listing(method_label(a, c) for a, c in zip(summary["algorithm"], summary["compressor"].astype(str)))
    text = (f"{len(summary)} runs in {summary['cell'].nunique() if 'cell' in summary else '?'} cells "
            f"({statuses}). Tasks: {_listing(summary['task'])}. Algorithms: {_listing(summary['algorithm'])}. "
            f"Compressors: {_listing(compressor_label(c) for c in summary['compressor'].astype(str))}. "
            f"Methods: {methods}. Topologies: {_listing(summary['topology'])}. "
            f"Node counts: {_listing(int(n) for n in summary['nodes'])}. "
            f"Seeds: {_listing(int(s) for s in summary['seed'])}.")
    if "network" in summary and summary["network"].notna().any():
        text += f" Network presets: {_listing(summary['network'].dropna())}."
    if "target" in summary and pd.to_numeric(summary["target"], errors="coerce").notna().any():
        source = summary["target_source"].iloc[0] if "target_source" in summary else "given"
        values = pd.to_numeric(summary["target"], errors="coerce").dropna()
        metric = str(summary["metric"].iloc[0]) if "metric" in summary else "test_acc"
        on_accuracy = "acc" in metric
        shown = [f"{t:.4g}%" for t in as_percent(values)] if on_accuracy else [f"{t:.4g}" for t in values]
        targets = _listing(shown)
        read_on = TTA_METRICS.get(metric, md_code(metric))
        text += f" Target for time/epochs/bits to target: {targets} ({md_text(source)}), read on {read_on}."
    return text


def study_file(run_dir: Path) -> Path | None:
    """The study file of the results folder ``run_dir``: its own study.yaml, else the config naming it."""
    own = Path(run_dir) / OWN_STUDY
    if own.is_file():
        return own
    name = re.escape(Path(run_dir).resolve().name)
    for path in sorted(CONFIG.glob("*.yaml")):
        try:
            if re.search(rf"^study:\s*[\"']?{name}[\"']?\s*(#.*)?$", path.read_text(), re.M):
                return path
        except OSError:
            continue
    return None


def _config(path: Path | None) -> dict:
    try:
        data = yaml.safe_load(path.read_text()) if path else None
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def compared(run_dir: Path) -> tuple[list[str], list[str]] | None:
    """(your methods, the baselines) of a `bench compare` study, None for any other study."""
    blocks = _config(Path(run_dir) / OWN_STUDY).get("blocks")
    if not isinstance(blocks, dict) or not isinstance(blocks.get("methods"), dict):
        return None
    methods = [str(m) for m in blocks["methods"].get("method") or []]
    baselines = [str(m) for m in (blocks.get("baselines") or {}).get("method") or []]
    return (methods, baselines) if methods else None


def purpose(run_dir: Path) -> str:
    """A paragraph: what the study is for, in its study file's words, and where the file is."""
    pair = compared(run_dir)
    if pair:
        return (f"A comparison written by `bench compare`: {md_text(', '.join(pair[0]))} against the baselines "
                f"{md_text(', '.join(pair[1]) or '(none)')}, ranked in the first table below. The paper's claims "
                "follow only where this study holds the cells they need.")
    path = study_file(run_dir)
    if path is None:
        return "No study file names this folder (config/*.yaml with `study:` its name), so its purpose is not known."
    comment = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    where = f"study file `{path.parent.name}/{path.name}`"
    if not comment:
        return f"The {where} says nothing of its purpose."
    return f"{md_text(' '.join(comment).replace('`', ''))} ({where})"


def _interval(values, scale: float = 1.0, digits: str = ".3g", count: bool = True) -> str:
    """median [95 % bootstrap interval] over seeds; "not reached" where the median seed never got there."""
    values = pd.to_numeric(pd.Series(values), errors="coerce")
    median, low, high = summarize_seeds(values)
    if math.isnan(median):
        return "—"
    reached = int(pd.Series(values).map(math.isfinite).sum())
    if not math.isfinite(median):
        return f"not reached ({reached}/{len(values)})"
    text = f"{median * scale:{digits}}"
    if len(values) > 1:
        high_text = "not reached" if not math.isfinite(high) else f"{high * scale:{digits}}"
        text += f" [{low * scale:{digits}}, {high_text}]"
    return text + (f" ({reached}/{len(values)})" if count else "")


def ranking(summary: pd.DataFrame, run_dir: Path) -> str | None:
    """Markdown: every method of a comparison ranked by its final accuracy (median over seeds), yours marked."""
    pair = compared(run_dir)
    if pair is None or summary is None or summary.empty:
        return None
    yours = set(pair[0])
    metric = LOCAL if has_local(summary) else AVERAGED
    rows = []
    for (algorithm, compressor), g in summary.groupby(["algorithm", "compressor"], sort=False):
        spec = f"{algorithm}/{compressor}"
        acc = as_percent(pd.to_numeric(g[metric], errors="coerce").where(g["status"] != "diverged"))
        rows.append({"method": md_text(method_label(algorithm, str(compressor)))
                     + (" **(yours)**" if spec in yours or (compressor == "none" and algorithm in yours) else ""),
                     "seeds": f"{len(g)}" + (f" ({int((g['status'] == 'diverged').sum())} diverged)"
                                             if (g["status"] == "diverged").any() else ""),
                     "final acc. (%)": _interval(acc, digits=".2f", count=False), "_sort": acc.median(),
                     "time to target (s)": _interval(g.get("time_to_target_s", [math.nan])),
                     "epochs to target": _interval(g.get("epochs_to_target", [math.nan])),
                     "Mbit to target": _interval(g.get("bits_to_target", [math.nan]), 1e-6)})
    table = pd.DataFrame(rows).sort_values("_sort", ascending=False, na_position="last").drop(columns="_sort")
    table.insert(0, "rank", range(1, len(table) + 1))
    target = pd.to_numeric(summary.get("target"), errors="coerce").dropna()
    goal = f"{as_percent(target).iloc[0]:.4g} %" if len(target) else "none set"
    return (f"Methods ranked by final accuracy ({'local models' if metric == LOCAL else 'averaged model'}, "
            f"median over seeds [95 % bootstrap interval]); time (modelled), epochs and Mbit a worker sent to the "
            f"target ({goal}) as median [interval] (seeds that reached it / seeds).\n\n"
            + table.to_markdown(index=False, disable_numparse=True) + "\n")
