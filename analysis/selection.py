"""Which runs a figure or a table compares: the finished ones, one data partition, one setting, one cell
per point, and the reference method every gap is measured against (REFERENCE). Shared by the figures
(analysis/figures/) and the analyses behind them (lag, speedup, noniid, tables); it imports none of them."""
from __future__ import annotations

import pandas as pd

from analysis.labels import with_methods

REFERENCE = "allreduce"  # the centralized method every gap is measured against: bench's name for it
# statuses without a final value to report; "diverged" is not among them: divergence is a result
FAILED = frozenset({"failed", "running", "interrupted", "unknown"})
IID_SCHEMES = ("shuffle", "split")  # the i.i.d. partitions, in order of preference


def usable(df: pd.DataFrame) -> pd.DataFrame:
    """Runs that finished, diverged ones included (divergence is a result); failed or unfinished
    runs have no final value to report."""
    return df[~df["status"].isin(FAILED)] if "status" in df else df


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
    allreduce = runs["algorithm"] == REFERENCE
    best = None
    for key, group in runs.groupby(["task", "topology", "nodes"], sort=True):
        task, topology, nodes = key
        if not group["algorithm"].eq(REFERENCE).any():
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
