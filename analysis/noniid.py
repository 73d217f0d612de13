"""The effect of a non-i.i.d. data partition (sorted, dirichlet:α) next to the i.i.d. one: final
accuracy per method and data variant, its difference to the i.i.d. variant with an interval across
seeds, and the gap to all-reduce SGD trained on the same partition."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.display import as_percent
from analysis.files import write_atomically
from analysis.labels import method_label, method_sort_key
from analysis.report_html import md_text
from analysis.selection import IID_SCHEMES, REFERENCE, one_cell_per, usable

SETTING = ["task", "topology", "nodes", "algorithm", "compressor"]
COLUMNS = ["task", "topology", "nodes", "method", "algorithm", "compressor", "data", "seeds", "diverged",
           "steps_per_epoch", "acc", "acc_ci_low", "acc_ci_high", "iid_data", "delta", "delta_ci_low",
           "delta_ci_high", "allreduce_acc", "gap"]


def mean_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and t-interval of independent values (NaN interval with fewer than two)."""
    from scipy import stats  # imported where used: 0.5 s a process
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    if len(v) < 2:
        return m, math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2.0, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return m, m - half, m + half


def difference_interval(a, b, level: float = 0.95) -> tuple[float, float, float]:
    """mean(a) − mean(b) with Welch's t-interval: seeds of two data variants are independent
    samples (a shared seed gives the same initial model but a different deal and batch order)."""
    from scipy import stats  # imported where used: 0.5 s a process
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) == 0 or len(b) == 0:
        return math.nan, math.nan, math.nan
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return diff, math.nan, math.nan
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = stats.t.ppf(0.5 + level / 2.0, dof) * se
    return diff, diff - half, diff + half


def iid_scheme(schemes) -> str | None:
    present = set(schemes)
    return next((s for s in IID_SCHEMES if s in present), None)


def noniid_table(summary: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per (task, topology, n, method, data). ``acc``: mean final test accuracy (%) over the
    seeds that did not diverge, with a t-interval; ``delta``: acc minus the same setting's acc on the
    i.i.d. partition (shuffle, else split), Welch interval; ``gap``: all-reduce's mean accuracy at
    the same task, n and data minus acc. Diverged seeds are counted, not averaged."""
    runs = usable(summary)
    runs = runs.assign(acc=as_percent(runs["final_test_acc"]).to_numpy(), data=runs["data"].astype(str))
    runs = one_cell_per(runs, SETTING + ["data"])
    alive = runs[runs["status"] != "diverged"]
    ref = alive[alive["algorithm"] == REFERENCE].groupby(["task", "nodes", "data"])["acc"].mean().to_dict()
    rows = []
    for key, g in runs.groupby(SETTING, sort=True):
        iid = iid_scheme(g["data"])
        base = alive.loc[alive.index.isin(g.index) & (alive["data"] == iid), "acc"] if iid else pd.Series(dtype=float)
        for scheme, h in g.groupby("data", sort=True):
            ok = h[h["status"] != "diverged"]["acc"]
            acc, lo, hi = mean_interval(ok, level)
            delta = difference_interval(ok, base, level) if iid and scheme != iid else (
                (0.0, math.nan, math.nan) if scheme == iid else (math.nan, math.nan, math.nan))
            steps = pd.to_numeric(h.get("steps_per_epoch"), errors="coerce") if "steps_per_epoch" in h else None
            ar = ref.get((key[0], key[2], scheme), math.nan)
            rows.append({**dict(zip(SETTING, key)), "method": method_label(key[3], key[4]), "data": scheme,
                         "seeds": len(h), "diverged": int((h["status"] == "diverged").sum()),
                         "steps_per_epoch": float(steps.median()) if steps is not None and steps.notna().any()
                         else math.nan,
                         "acc": acc, "acc_ci_low": lo, "acc_ci_high": hi, "iid_data": iid,
                         "delta": delta[0], "delta_ci_low": delta[1], "delta_ci_high": delta[2],
                         "allreduce_acc": ar, "gap": ar - acc})
    table = pd.DataFrame(rows, columns=COLUMNS)
    # only settings that were run on more than one partition say anything about the partition
    counts = table.groupby(SETTING)["data"].transform("nunique") if len(table) else pd.Series(dtype=int)
    return table[counts > 1].reset_index(drop=True)


def _interval(value, lo, hi, sign=False) -> str:
    if not math.isfinite(value):
        return "—"
    text = f"{value:+.2f}" if sign else f"{value:.2f}"
    return text + (f" [{lo:+.2f}, {hi:+.2f}]" if sign else f" [{lo:.2f}, {hi:.2f}]") if math.isfinite(lo) else text


def table_markdown(table: pd.DataFrame) -> str:
    order = sorted(table["method"].unique(), key=method_sort_key)
    shown = table.assign(order=table["method"].map(order.index)).sort_values(
        ["task", "topology", "nodes", "order", "data"])
    rows = [{"method": md_text(r["method"]), "topology": md_text(r["topology"]), "n": int(r["nodes"]),
             "data": md_text(r["data"]),
             "seeds (diverged)": f"{r['seeds']} ({r['diverged']})",
             "steps/epoch": f"{r['steps_per_epoch']:g}" if math.isfinite(r["steps_per_epoch"]) else "—",
             "accuracy % [95% CI]": _interval(r["acc"], r["acc_ci_low"], r["acc_ci_high"]),
             "Δ to i.i.d. (pp) [95% CI]": "i.i.d. reference" if r["data"] == r["iid_data"] else
             _interval(r["delta"], r["delta_ci_low"], r["delta_ci_high"], sign=True),
             "gap to all-reduce, same data (pp)": f"{r['gap']:.2f}" if math.isfinite(r["gap"]) else "—"}
            for _, r in shown.iterrows()]
    return pd.DataFrame(rows).to_markdown(index=False) + "\n"


def partition_name(scheme: str) -> str:
    """A partition as a table's column names it: ``α = 0.1`` for dirichlet:0.1, ``i.i.d.`` for the i.i.d. ones."""
    name, _, arg = scheme.partition(":")
    return "i.i.d." if scheme in IID_SCHEMES else f"α = {arg}" if name == "dirichlet" else scheme


def gap_pivot_markdown(table: pd.DataFrame) -> str:
    """noniid_table's rows of the (task, topology, n) run on the most partitions as one line per method across the
    partitions, most heterogeneous first: all-reduce's accuracy (%), then each method's gap to it (pp, positive:
    worse), both means over the seeds that did not diverge."""
    where = ["task", "topology", "nodes"]
    key = table.groupby(where)["data"].nunique().idxmax()
    g = table[(table[where] == pd.Series(key, index=where)).all(axis=1)]
    schemes = sorted(g["data"].unique(), key=heterogeneity)
    ref = g.groupby("data")["allreduce_acc"].first()
    rows = [{"method": f"{method_label(REFERENCE)} (accuracy, %)", **{s: f"{ref[s]:.1f}" for s in schemes}}]
    for method in sorted(set(g.loc[g["algorithm"] != REFERENCE, "method"]), key=method_sort_key):
        gaps = g[g["method"] == method].set_index("data")["gap"]
        rows.append({"method": md_text(method), **{s: f"{gaps[s]:+.1f}" if s in gaps and math.isfinite(gaps[s])
                                                   else "—" for s in schemes}})
    out = pd.DataFrame(rows).rename(columns={s: partition_name(s) for s in schemes})
    return out.to_markdown(index=False, disable_numparse=True) + "\n"


def noniid_section(summary: pd.DataFrame) -> str | None:
    """report.md's section, when some setting was run on two or more data partitions."""
    if "data" not in summary:
        return None
    table = noniid_table(summary)
    if table.empty:
        return None
    return ("Final test accuracy of the averaged model on each data partition: `shuffle` reshuffles and redeals "
            "all samples every epoch (i.i.d.), `sorted` deals label-sorted contiguous blocks once (each worker "
            "sees one or two classes), `dirichlet:α` gives each worker a share of every class drawn from "
            "Dirichlet(α), once. Means over seeds that did not diverge with t-intervals; Δ: difference to the "
            "same setting on the i.i.d. partition with Welch's interval; gap: all-reduce SGD on the same "
            "partition minus the method. steps/epoch: synchronous rounds per epoch (median over seeds): one "
            "pass at the mean shard size under every partition, so runs of equal epochs take equal steps "
            "(unequal Dirichlet shards are cycled or subsampled to it). Table: [noniid.csv](noniid.csv).\n\n"
            + table_markdown(table))


def write_table(run_dir: Path, summary: pd.DataFrame) -> Path | None:
    if "data" not in summary:
        return None
    table = noniid_table(summary)
    if table.empty:
        return None
    return write_atomically(Path(run_dir) / "noniid.csv", lambda tmp: table.to_csv(tmp, index=False))


def heterogeneity(scheme: str) -> tuple:
    """Sort key of a data partition, most heterogeneous first: sorted blocks, then dirichlet:α by α (small α:
    each worker holds few classes), any other non-i.i.d. scheme, and the i.i.d. ones last."""
    if scheme in IID_SCHEMES:
        return (3, IID_SCHEMES.index(scheme), 0.0)
    if scheme == "sorted":
        return (0, 0, 0.0)
    name, _, arg = scheme.partition(":")
    if name == "dirichlet":
        try:
            return (1, 0, float(arg))
        except ValueError:
            pass
    return (2, 0, 0.0)


GAP_COLUMNS = ["task", "topology", "nodes", "method", "algorithm", "compressor", "data", "seeds", "reference_seeds",
               "gap", "gap_ci_low", "gap_ci_high"]


def gap_table(summary: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per (task, topology, n, method, data) of every method but all-reduce, where all-reduce SGD ran the
    same task, n and data: ``gap``, all-reduce's mean final test accuracy (pp) minus the method's, with Welch's
    interval over the two sets of seeds (independent samples); diverged seeds are left out of both means."""
    runs = usable(summary)
    runs = runs.assign(acc=as_percent(runs["final_test_acc"]).to_numpy(), data=runs["data"].astype(str))
    runs = one_cell_per(runs, SETTING + ["data"])
    alive = runs[runs["status"] != "diverged"]
    ref = {key: g["acc"].to_numpy() for key, g in alive[alive["algorithm"] == REFERENCE].groupby(
        ["task", "nodes", "data"])}
    rows = []
    for key, g in alive[alive["algorithm"] != REFERENCE].groupby(SETTING + ["data"], sort=True):
        reference = ref.get((key[0], key[2], key[5]))
        if reference is None:
            continue
        gap, lo, hi = difference_interval(reference, g["acc"].to_numpy(), level)
        rows.append({**dict(zip(SETTING + ["data"], key)), "method": method_label(key[3], key[4]),
                     "seeds": len(g), "reference_seeds": len(reference), "gap": gap, "gap_ci_low": lo,
                     "gap_ci_high": hi})
    return pd.DataFrame(rows, columns=GAP_COLUMNS)
