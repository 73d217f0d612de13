"""Paper tables from a run summary: Table 1 (final accuracy by compressor × algorithm) and a
per-cell table, as Markdown (and LaTeX for Table 1)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.display import as_percent
from analysis.labels import (algorithm_label, compresses, compressor_label, compressor_order, method_label,
                             method_sort_key)
from analysis.report_html import md_text
from analysis.selection import usable
from analysis.units import bits_counts, bits_short

def table1_algorithms(summary: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(Table 1's columns: the algorithms that compress, the references: those that send exact models),
    each in legend order, as the runs describe themselves (labels.compresses)."""
    present = [str(a) for a in dict.fromkeys(summary["algorithm"].dropna())] if "algorithm" in summary else []
    order = sorted(present, key=lambda a: algorithm_label(a).lower())  # registers no method (figures' looks stay)
    return [a for a in order if compresses(a)], [a for a in order if not compresses(a)]


def accuracy_text(runs: pd.DataFrame) -> str:
    """Final accuracy of one cell's seeds: "92.50 ± 0.50" (sample std), "diverges" when every seed
    diverged, "17.03 (2 of 3 diverged)" (mean of the others) when some did. ``acc`` is in %."""
    diverged = int((runs["status"] == "diverged").sum())
    alive = runs.loc[runs["status"] != "diverged", "acc"].dropna()
    if len(runs) == 0:
        return "—"
    if diverged == len(runs):
        return "diverges"
    if alive.empty:
        return "n/a"
    if diverged:
        return f"{alive.mean():.2f} ({diverged} of {len(runs)} diverged)"
    return f"{alive.mean():.2f} ± {alive.std(ddof=1):.2f}" if len(alive) > 1 else f"{alive.mean():.2f}"


# what Table 1 can report: the paper's (each worker's own model, averaged over workers) and the
# averaged model x̄ (one model, the mean of the workers')
LOCAL, AVERAGED = "final_local_acc", "final_test_acc"
METRIC_NAMES = {LOCAL: "local models (the paper's metric)", AVERAGED: "averaged model"}


def has_local(summary: pd.DataFrame) -> bool:
    return LOCAL in summary and pd.to_numeric(summary[LOCAL], errors="coerce").notna().any()


def _with_acc(summary: pd.DataFrame, value: str = AVERAGED) -> pd.DataFrame:
    data = usable(summary).copy()
    data["acc"] = as_percent(data[value])
    return data


def _worker_spread(runs: pd.DataFrame) -> str:
    """ " (workers ± s)": the standard deviation over workers of the local accuracies, averaged over seeds."""
    spread = pd.to_numeric(runs.get("final_local_acc_std", pd.Series(dtype=float)), errors="coerce").dropna()
    return f" (workers ± {100 * spread.mean():.2f})" if len(spread) else ""


def table1_frame(summary: pd.DataFrame, value: str = AVERAGED) -> tuple[pd.DataFrame, list[str]]:
    """(rows = compressor, columns = DCD/ECD/Choco present, cells as text) and the reference lines;
    ``value`` is AVERAGED or LOCAL (then each cell also gives the spread over workers)."""
    data = _with_acc(summary, value)

    def text(g: pd.DataFrame) -> str:
        shown = accuracy_text(g)
        return shown + _worker_spread(g) if value == LOCAL and shown not in ("—", "diverges", "n/a") else shown

    columns, references = table1_algorithms(data)
    compressed = data[data["algorithm"].isin(columns)]
    specs = sorted(compressed["compressor"].astype(str).unique(), key=compressor_order)
    table = pd.DataFrame(index=[compressor_label(s) for s in specs],
                         columns=[algorithm_label(a) for a in columns], dtype=object)
    for spec in specs:
        for algorithm in columns:
            g = compressed[(compressed["compressor"].astype(str) == spec) & (compressed["algorithm"] == algorithm)]
            table.loc[compressor_label(spec), algorithm_label(algorithm)] = text(g) if len(g) else "—"
    table.index.name = "compression"
    refs = {algorithm_label(a): data[data["algorithm"] == a] for a in references}
    lines = [f"{name}: {text(g)} ({len(g)} seed{'' if len(g) == 1 else 's'})" for name, g in refs.items() if len(g)]
    return table, lines


def table1_markdown(summary: pd.DataFrame, value: str = AVERAGED) -> str:
    """Table 1 as Markdown; every cell and reference line is text (a name's ``|`` or markup stays literal)."""
    table, lines = table1_frame(summary, value)
    header = ["compression", *table.columns]
    out = ["| " + " | ".join(map(md_text, header)) + " |",
           "|" + "|".join(["---"] + [":---:"] * len(table.columns)) + "|"]
    out += ["| " + " | ".join(map(md_text, [idx, *row])) + " |" for idx, row in zip(table.index, table.to_numpy())]
    return "\n".join(out + ([""] + [f"{md_text(line)}  " for line in lines] if lines else [])) + "\n"


def _tex(text: str) -> str:
    text = str(text).replace("\\", r"\textbackslash{}")
    for char in "&%$#_{}":
        text = text.replace(char, "\\" + char)
    return text.replace("±", r"$\pm$").replace("—", "--")


def table1_latex(summary: pd.DataFrame, value: str = AVERAGED) -> str:
    """A booktabs tabular; the references span the last rows."""
    table, lines = table1_frame(summary, value)
    width = len(table.columns) + 1
    out = [r"\begin{tabular}{l" + "c" * len(table.columns) + "}", r"\toprule",
           " & ".join(["compression", *map(_tex, table.columns)]) + r" \\", r"\midrule"]
    out += [" & ".join([_tex(idx), *map(_tex, row)]) + r" \\" for idx, row in zip(table.index, table.to_numpy())]
    if lines:
        out.append(r"\midrule")
        out += [rf"\multicolumn{{{width}}}{{l}}{{{_tex(line)}}} \\" for line in lines]
    return "\n".join(out + [r"\bottomrule", r"\end{tabular}"]) + "\n"


def _to_target_text(values: pd.Series, statuses: pd.Series, scale: float = 1.0) -> str:
    """Median over seeds (unreached = inf) with how many reached: "12.3 (3/3)", "censored (0/3)"."""
    if statuses.eq("no_target").all() or statuses.isna().all():
        return "—"
    v = pd.to_numeric(values, errors="coerce").to_numpy(float).copy()
    reached = statuses.eq("reached").to_numpy()
    v[~reached] = math.inf
    median = float(np.median(v))
    count = f"{int(reached.sum())}/{len(v)}"
    if math.isfinite(median):
        return f"{median * scale:.3g} ({count})"
    missed = statuses[~reached].value_counts()
    return f"{missed.index[0]} ({count})"


def _status_text(statuses: pd.Series) -> str:
    return ", ".join(f"{n} {s}" for s, n in statuses.value_counts().sort_index().items())


def cell_table_markdown(table: pd.DataFrame) -> str:
    """Per-cell Markdown table from a per-run summary (aggregated here: final accuracy as in
    Table 1, costs to the target as median over seeds with k/m reached) or from
    ``analysis.summary.cell_summary`` output (medians and bootstrap CIs as computed there)."""
    if table is None or table.empty:
        return "(no runs)\n"
    per_run = "run_id" in table
    data = table.copy()
    data["method"] = [method_label(a, c) for a, c in zip(data["algorithm"], data["compressor"].astype(str))]
    keys = ["method", "topology", "nodes"] + [k for k in ("task", "network", "data")
                                              if k in data and data[k].nunique() > 1]
    cell_key = "cell" if "cell" in data else None
    if cell_key and data.groupby(keys, dropna=False)[cell_key].nunique().max() > 1:
        keys.append(cell_key)  # cells differing in other settings (e.g. LR) need their key to be told apart
    rows = []
    mbit_header = f"Mbit to target ({bits_short(bits_counts(data))})"
    if per_run:
        data["acc"] = as_percent(data["final_test_acc"])
        for key, g in data.groupby(keys, dropna=False, sort=False):
            status = g["tta_status"] if "tta_status" in g else pd.Series("no_target", index=g.index)
            cost = {c: (g[c] if c in g else pd.Series(math.nan, index=g.index))
                    for c in ("time_to_target_s", "epochs_to_target", "bits_to_target")}
            local = {}
            if has_local(data):
                u = usable(g).assign(acc=lambda d: as_percent(d[LOCAL]))
                local = {"local models acc. (%)": accuracy_text(u) + _worker_spread(u)}
            rows.append({**dict(zip(keys, key)), "seeds": _status_text(g["status"]), **local,
                         "averaged model acc. (%)" if local else "final acc. (%)": accuracy_text(usable(g)),
                         "time to target (s)": _to_target_text(cost["time_to_target_s"], status),
                         "epochs to target": _to_target_text(cost["epochs_to_target"], status),
                         mbit_header: _to_target_text(cost["bits_to_target"], status, 1e-6)})
    else:
        acc = as_percent(data["final_acc_median"])
        for i, r in data.iterrows():
            rows.append({**{k: r[k] for k in keys}, "seeds": f"{r['n_seeds']} ({r.get('statuses', '')})",
                         "final acc. median (%)": f"{acc[i]:.2f}",
                         **{label: _median_text(r, col, scale) for label, col, scale in [
                             ("time to target (s)", "time_to_target_s", 1.0),
                             ("epochs to target", "epochs_to_target", 1.0),
                             (mbit_header, "bits_to_target", 1e-6)]},
                         "reached": f"{r.get('n_reached', 0)}/{r['n_seeds']}"})
    out = pd.DataFrame(rows).rename(columns={"nodes": "n"})
    out = out.sort_values(["method", "n"], key=lambda s: s.map(method_sort_key) if s.name == "method" else s)
    names = [c for c in ("method", "topology", "task", "network", "data", "cell", "seeds") if c in out]
    out[names] = out[names].map(lambda v: md_text(v) if isinstance(v, str) else v)  # names as text, after sorting
    return out.to_markdown(index=False, disable_numparse=True) + "\n"


def _median_text(row: pd.Series, col: str, scale: float) -> str:
    value = row.get(f"{col}_median", math.nan)
    if pd.isna(value):
        return "—"
    if not math.isfinite(value):
        return "not reached"
    return f"{value * scale:.3g} [{row[f'{col}_ci_low'] * scale:.3g}, {row[f'{col}_ci_high'] * scale:.3g}]"


def cost_table_markdown(summary: pd.DataFrame) -> str:
    """Every method at matched cost (the ``methods`` study): a row per method and graph (a centralized method, which
    uses no graph, once) with the final accuracy of the averaged model on each partition every row ran (i.i.d.
    first), the Mbit a worker sent to the target on the i.i.d. one (as the cell table: median over seeds with k/m
    reached), and the kbit a worker sends a step, as counted and in the paper's count (one payload a message)."""
    from analysis.labels import centralized
    from analysis.noniid import heterogeneity, iid_scheme

    data = _with_acc(summary).assign(data=lambda d: d["data"].astype(str))
    data["method"] = [method_label(a, c) for a, c in zip(data["algorithm"], data["compressor"].astype(str))]
    data["graph"] = ["— (centralized)" if centralized(a) else t for a, t in zip(data["algorithm"], data["topology"])]
    keys = ["method", "graph"] + [k for k in ("task", "nodes", "network") if data[k].nunique() > 1]
    ran = data.groupby(keys)["data"].agg(set)
    schemes = sorted(set.intersection(*ran), key=lambda s: (iid_scheme([s]) is None, heterogeneity(s)))
    iid, counted = iid_scheme(schemes), bits_short(bits_counts(data))
    rows = []
    for key, g in data.groupby(keys, sort=False):
        on_iid = g[g["data"] == iid]
        kbit = lambda col: f"{pd.to_numeric(g[col], errors='coerce').median() / 1e3:.1f}"  # noqa: E731
        rows.append({**{k: md_text(str(v)) for k, v in zip(keys, key)},
                     **{f"{s} acc. (%)": accuracy_text(g[g["data"] == s]) for s in schemes},
                     f"Mbit to target, {iid} ({counted})": _to_target_text(on_iid["bits_to_target"],
                                                                            on_iid["tta_status"], 1e-6),
                     f"kbit/worker per step ({counted})": kbit("bits_per_step"),
                     "kbit, paper's count": kbit("paper_bits_per_step")})
    out = pd.DataFrame(rows)
    out = out.sort_values(["method", "graph"], key=lambda s: s.map(method_sort_key) if s.name == "method" else s)
    return out.to_markdown(index=False, disable_numparse=True) + "\n"


def spectral_markdown(summary: pd.DataFrame) -> str:
    """The graphs of the accuracy_vs_spectral_gap figure's runs (its spectral_table) by their effective number of
    neighbours: ρ, n_W(0.9), and per method the final accuracy (%, mean over the seeds that did not diverge) of the
    local models where the runs scored them (the paper's metric, which the spectral claims read), else of the
    averaged model, with its gap to all-reduce's in brackets (points, positive: worse)."""
    from analysis.figures.accuracy_vs_spectral_gap import chosen, spectral_table
    from analysis.selection import REFERENCE

    sel = chosen(summary)
    if isinstance(sel, str):
        raise ValueError(f"no spectral table: {sel}")
    value = LOCAL if has_local(sel) else AVERAGED
    ref = as_percent(sel.loc[(sel["algorithm"] == REFERENCE) & (sel["status"] != "diverged"), value]).mean()
    table = spectral_table(sel, value)
    rows = []
    for topology, g in table.sort_values(["n_eff", "spectral_gap", "topology"]).groupby("topology", sort=False):
        by = g.set_index("method")
        rows.append({"graph": md_text(topology), "ρ": f"{g['spectral_gap'].iloc[0]:.3f}",
                     "n_W(0.9)": f"{g['n_eff'].iloc[0]:.1f}",
                     **{f"{md_text(m)}: {METRIC_NAMES[value].split(' (')[0]} (gap to all-reduce's {ref:.1f})":
                        f"{by.at[m, 'acc']:.1f} ({ref - by.at[m, 'acc']:+.1f})" if m in by.index else "—"
                        for m in sorted(table["method"].unique(), key=method_sort_key)}})
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True) + "\n"


def _means_text(runs: pd.DataFrame, local: bool) -> str:
    """ "66.3 / 59.0": the averaged model's and the local models' final accuracy (%, mean over the seeds that did
    not diverge; the second only where ``local``), with how many seeds diverged where some did."""
    alive = runs[runs["status"] != "diverged"]
    if alive.empty:
        return "diverges"
    values = [AVERAGED] + ([LOCAL] if local else [])
    text = " / ".join(f"{as_percent(alive[v]).mean():.1f}" for v in values)
    return text + (f" ({len(runs) - len(alive)} of {len(runs)} diverged)" if len(alive) < len(runs) else "")


def scaling_markdown(summary: pd.DataFrame) -> str:
    """The runs of the gap_vs_nodes figure (its chosen) by n: all-reduce's averaged model, and per decentralized
    method and topology the averaged model / the local models (where the runs scored them) as _means_text."""
    from analysis.figures.gap_vs_nodes import chosen
    from analysis.selection import REFERENCE

    sel = chosen(summary)
    if isinstance(sel, str):
        raise ValueError(f"no scaling table: {sel}")
    ref = sel["algorithm"] == REFERENCE
    pairs = sorted(sel.loc[~ref, ["method", "topology"]].drop_duplicates().itertuples(index=False),
                   key=lambda p: (method_sort_key(p[0]), p[1]))
    rows = []
    for nodes, g in sel.groupby("nodes"):
        row = {"n": str(nodes), "all-reduce": _means_text(g[g["algorithm"] == REFERENCE], False) if
               (g["algorithm"] == REFERENCE).any() else "—"}
        for method, topology in pairs:
            runs = g[(g["method"] == method) & (g["topology"] == topology)]
            row[f"{md_text(method)}, {md_text(topology)}"] = _means_text(runs, has_local(runs)) if len(runs) else "—"
        rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True) + "\n"
