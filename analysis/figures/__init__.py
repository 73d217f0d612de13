"""One module per figure: a function from a tidy DataFrame to PNG and PDF files.

``python -m analysis figures DIR [--only NAME ...]`` draws every figure the runs in DIR support; a figure
named with ``--only`` that cannot be drawn is an error (exit status 1, the reason on stderr).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

import pandas as pd

from analysis.files import open_lock, write_atomically, write_text_atomically
from analysis.labels import with_methods

# figure name -> module; each module has plot_<name>(df, out_stem) and draw(...) -> (paths, caption) | reason
FIGURES = ["accuracy_curves", "gap_vs_nodes", "accuracy_vs_spectral_gap", "time_to_accuracy", "consensus",
           "lag_vs_consensus", "noniid_effect", "sensitivity", "speedup", "methods", "faults_effect"]
# the question each figure answers: how `snakemake --report` groups them
QUESTIONS = {
    "consensus": "1. Does compressed gossip reach consensus?",
    "accuracy_curves": "2. How fast does each method learn: epochs, bits, time?",
    "time_to_accuracy": "2. How fast does each method learn: epochs, bits, time?",
    "gap_vs_nodes": "3. How do the graph and n set the gap to all-reduce?",
    "accuracy_vs_spectral_gap": "3. How do the graph and n set the gap to all-reduce?",
    "lag_vs_consensus": "3. How do the graph and n set the gap to all-reduce?",
    "speedup": "4. Does training speed up linearly with n?",
    "noniid_effect": "5. What does non-i.i.d. data cost?",
    "sensitivity": "6. How sensitive is each method to its knobs?",
    "methods": "7. Which method wins at matched bits and matched time?",
    "faults_effect": "8. What do lost messages and slow workers cost?",
}
DEFAULT_TARGET_REL = 0.95
_FAILED = {"failed", "running", "interrupted", "unknown"}


def as_percent(values) -> pd.Series:
    """Accuracies in %: runs record fractions in [0, 1]; a column already in % is left alone."""
    s = pd.to_numeric(pd.Series(values), errors="coerce").astype(float)
    return s * 100.0 if s.notna().any() and s.max() <= 1.0 + 1e-9 else s


def usable(df: pd.DataFrame) -> pd.DataFrame:
    """Runs that finished, diverged ones included (divergence is a result); failed or unfinished
    runs have no final value to report."""
    return df[~df["status"].isin(_FAILED)] if "status" in df else df


def save_figure(fig, out_stem: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".pdf")]
    for path in paths:
        # complete or absent: a pipeline job killed mid-save leaves no half-written figure
        write_atomically(path, lambda tmp, fmt=path.suffix[1:]: fig.savefig(tmp, dpi=150, format=fmt,
                                                                            bbox_inches="tight"))
    plt.close(fig)
    return paths


IID_SCHEMES = ("shuffle", "split")  # the i.i.d. partitions, in order of preference


def iid_only(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of one data partition: the i.i.d. one (shuffle, else split) when present, else the
    most-run. Figures about topology, n or compression compare like with like; the non-i.i.d.
    variants of a study have their own analysis (analysis/noniid.py)."""
    if "data" not in runs or runs["data"].nunique(dropna=False) <= 1:
        return runs
    present = set(runs["data"].dropna())
    scheme = next((s for s in IID_SCHEMES if s in present), None)
    if scheme is None:
        scheme = runs["data"].value_counts().sort_index().idxmax()
    return runs[runs["data"] == scheme]


def select_setting(runs: pd.DataFrame, min_methods: int = 1):
    """The (task, topology, nodes) with the most runs among those with >= ``min_methods`` methods,
    and its runs. All-reduce does not use the topology, so its runs at the same task and n join
    every topology's group unless some were recorded under that topology. None if nothing fits."""
    runs = with_methods(runs.drop_duplicates("run_id"))
    allreduce = runs["algorithm"] == "allreduce"
    best = None
    for key, group in runs.groupby(["task", "topology", "nodes"], sort=True):
        task, topology, nodes = key
        if not group["algorithm"].eq("allreduce").any():
            group = pd.concat([group, runs[allreduce & (runs["task"] == task) & (runs["nodes"] == nodes)]])
        if group["method"].nunique() >= min_methods and (best is None or len(group) > len(best[1])):
            best = (key, group)
    return best


def one_cell_per(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Keep, for each combination of ``keys``, the runs of its most-run cell (cells differing in,
    e.g., LR would otherwise be averaged as if they were seeds of one setting)."""
    if "cell" not in runs:
        return runs
    counts = runs.groupby(keys + ["cell"], dropna=False).size().rename("n").reset_index()
    keep = counts.sort_values(["n", "cell"], ascending=[False, True]).drop_duplicates(keys)["cell"]
    return runs[runs["cell"].isin(set(keep))]


def load_tables(run_dir: Path, with_skipped: bool = False):
    """(points, summary, note) of the runs under ``run_dir``; a table that cannot be had is None
    and ``note`` says why. ``DIR/summary.csv`` (from ``python -m analysis summarize``) wins; without
    it the summary is computed with the pipeline's default target, 0.95 × best all-reduce accuracy.
    ``with_skipped``: also the run directories left out and why (Runs.skipped), from the same reading."""
    from analysis.summary import read_summary

    summary_csv = Path(run_dir) / "summary.csv"
    try:  # one of other columns or values raises DamagedFile (one line from the command line)
        summary = read_summary(summary_csv) if summary_csv.is_file() else None
    except (OSError, ValueError):  # damaged (pandas' parser errors are ValueErrors): computed again below
        summary = None

    def out(points, summary, note, skipped=()):
        return (points, summary, note, list(skipped)) if with_skipped else (points, summary, note)

    try:
        from analysis.load import load_runs
    except ImportError:
        return out(None, summary, "analysis.load is not available")
    runs = load_runs(run_dir)
    if not len(runs):
        return out(None, summary, f"no readable runs under {run_dir}", runs.skipped)
    if summary is None:
        from analysis.summary import summarize

        summary = summarize(runs, target_rel=DEFAULT_TARGET_REL)
    return out(runs.points, summary, "", runs.skipped)


def _index_problem(index) -> str | None:
    """What is wrong with index.json's content, or None: it maps figure names (plain file names: the
    report links and inlines figures/NAME.png) to caption strings."""
    if not isinstance(index, dict):
        return f"a JSON {type(index).__name__}, not a mapping of figure names to captions"
    for name, caption in index.items():
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            return f"figure name {name!r} is not a plain file name"
        if not isinstance(caption, str):
            return f"the caption of {name!r} is a {type(caption).__name__}, not a string"
    return None


def read_index(fig_dir: Path) -> dict[str, str]:
    """figures/index.json (figure name -> caption); empty when there is none. A damaged one is one
    line naming it (UsageError: exit status 2), never a traceback and never silently replaced."""
    path = Path(fig_dir) / "index.json"
    if not path.is_file():
        return {}
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError) as err:  # truncated, not JSON, not UTF-8
        why = f"not JSON ({err})" if isinstance(err, ValueError) else (err.strerror or str(err))
    else:
        why = _index_problem(index)
        if why is None:
            return index
    from analysis.cli import UsageError

    raise UsageError(f"{path} is damaged: {why}; remove it and run `python -m analysis figures` again")


def _open_index_lock(fig_dir: Path) -> int:
    """The lock of index.json (figures/.index.lock), opened not through a link: a link or a foreign
    file there is one line (UsageError) and its target is left as it was."""
    fig_dir.mkdir(parents=True, exist_ok=True)
    try:
        return open_lock(fig_dir / ".index.lock")
    except ValueError as err:
        from analysis.cli import UsageError

        raise UsageError(str(err)) from None


def _update_index(fig_dir: Path, lock: int, drawn: dict[str, str], attempted: set[str]) -> Path:
    """Merge this call's captions into index.json, keeping figures not attempted now. The pipeline
    draws one figure per job, in parallel, so the read-merge-write holds ``lock`` (_open_index_lock)."""
    import fcntl

    path = fig_dir / "index.json"
    fcntl.flock(lock, fcntl.LOCK_EX)
    index = {k: v for k, v in read_index(fig_dir).items()
             if k not in attempted and (fig_dir / f"{k}.png").is_file()}
    index.update(drawn)
    write_text_atomically(path, json.dumps(dict(sorted(index.items())), indent=2, ensure_ascii=False) + "\n")
    return path


def draw_consensus(run_dir: Path, points, summary, out_stem: Path):
    """The consensus figure from every ``traces.csv`` under the results directory."""
    files = sorted(Path(run_dir).rglob("traces.csv"))
    if not files:
        return f"no traces.csv under {run_dir} (written by `bench consensus --out`)"
    from analysis.figures.consensus import plot_consensus

    from analysis.checks import DamagedFile
    from analysis.consensus import read_trace

    try:
        traces = pd.concat([read_trace(f) for f in files], ignore_index=True)
    except (OSError, ValueError, DamagedFile) as err:
        return f"a consensus trace cannot be read: {' '.join(str(err).split())}"
    first = traces.iloc[0]
    caption = (f"Average consensus (Choco-Gossip, no gradient) on a {first['topology']} of n = {first['nodes']} "
               f"workers (spectral gap ρ = {first['spectral_gap']:.3g}), d = {first['dim']}: consensus error "
               "relative to the start against gossip rounds (left) and against Mbit a worker put on its links (right, "
               "log scale, from the first round on: round 0 sends nothing, so it has no place on that axis), for "
               "each compressor (γ as shown) and for exact gossip, each in the colour and marker its Choco-SGD "
               "method (exact gossip: D-PSGD's) has in the other figures. The dotted line marks 10⁻⁴. "
               "The paper expects linear convergence for every compressor, at a rate set by ρ²δ, so the "
               "compressed methods need more rounds but fewer bits.")
    return plot_consensus(traces, out_stem), caption


def _drawer(name: str):
    if name == "consensus":
        return draw_consensus
    return importlib.import_module(f"analysis.figures.{name}").draw


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis figures", description="Draw every figure DIR's data support.")
    p.add_argument("dir", type=Path, help="a study's results directory (runs/, summary.csv, consensus/)")
    p.add_argument("--only", nargs="+", choices=FIGURES, metavar="NAME", help=f"draw only these: {', '.join(FIGURES)}")
    args = p.parse_args(argv)
    if not args.dir.is_dir():
        print(f"error: results directory not found: {args.dir}", file=sys.stderr)
        return 2
    fig_dir = args.dir / "figures"
    # refused before any figure is drawn: a link where the lock should be, a damaged index (merged into, not lost)
    lock = _open_index_lock(fig_dir)
    try:
        read_index(fig_dir)
        status = _draw(args, fig_dir, lock)
    finally:
        os.close(lock)  # releases the lock
    return status


def _draw(args, fig_dir: Path, lock: int) -> int:
    points, summary, note = load_tables(args.dir)
    wanted = args.only or FIGURES
    drawn: dict[str, str] = {}
    missed = []
    for name in wanted:
        result = _drawer(name)(args.dir, points, summary, fig_dir / name)
        if isinstance(result, str):
            why = result + (f" ({note})" if note and name != "consensus" else "")
            print(f"skipped {name}: {why}")
            missed.append(f"{name}: {why}")
            continue
        paths, drawn[name] = result
        for path in paths:
            print(f"wrote {path}")
    print(f"wrote {_update_index(fig_dir, lock, drawn, set(wanted))}")
    if args.only and missed:  # asked for by name (a pipeline job): not drawing it is the job's failure, said here
        for line in missed:
            print(f"error: figure {line}", file=sys.stderr)
        return 1
    return 0
