"""What an unreliable network costs (the `faults` study). Top row, one panel per topology: the final
accuracy of the workers' own models against the share of messages lost, a line per method, losses drawn
independently (solid, filled) and in bursts (dashed, hollow), all-reduce on a perfect network as a
dotted reference. Bottom row: the modelled time to the target accuracy against how badly the workers
straggle, with 0 for the same method on a perfect network; an unreached target is marked where its runs
ended, as in the time_to_accuracy figure."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures import requirements as req  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis.figures.faults_panels import (SPREAD, add_legends, legend_handles, plot_losses,  # noqa: E402
                                            plot_stragglers)
from analysis.figures.time_to_accuracy import bar_table, log_axis, run_ends  # noqa: E402
from analysis.labels import centralized, method_sort_key, with_methods  # noqa: E402
from analysis.selection import REFERENCE, iid_only, one_cell_per, usable  # noqa: E402

NO_FAULTS = ("needs runs on an unreliable network: a faults: setting with drop > 0 (losses at a rate) or an "
             "exponential straggler")
MAX_TOPOLOGIES = 4
KEYS = ["topology", "method", "drop", "drop_model", "burst", "straggler_mean", "late", "staleness", "active",
        "absences", "pairwise"]


def needs(grid: req.Grid) -> str | None:
    """A decentralized run that lost messages at a rate, or any run with an exponential straggler."""
    runs = req.iid_runs(grid)
    losses = req.lossy(runs) & (runs["algorithm"] != REFERENCE)
    return None if (losses | req.straggled(runs)).any() else NO_FAULTS


def _on(data: pd.DataFrame, topology) -> pd.DataFrame:
    """The runs of one topology; a method that uses no graph (all-reduce) from any topology when it has no
    run under this one."""
    here = data[data["topology"] == topology]
    graphless = data[[centralized(a) for a in data["algorithm"]]]
    missing = graphless[~graphless["method"].isin(set(here["method"]))]
    return pd.concat([here, missing.assign(topology=topology)], ignore_index=True)


def _topologies(runs: pd.DataFrame) -> list:
    """The topologies of ``runs``, sparsest first (least spectral gap, then name), at most MAX_TOPOLOGIES."""
    gaps = pd.to_numeric(runs["spectral_gap"], errors="coerce").groupby(runs["topology"]).median()
    return sorted(gaps.index, key=lambda t: (np.nan_to_num(gaps[t], nan=np.inf), str(t)))[:MAX_TOPOLOGIES]


def loss_table(data: pd.DataFrame, value: str) -> pd.DataFrame:
    """One row per (topology, method, loss model, burst, drop): the median, min and max of ``value`` over the
    seeds that have it, their count and the runs' count. ``model``: ``independent`` (Bernoulli; the runs
    without losses are its drop 0) or ``bursts`` (Gilbert-Elliott)."""
    data = data.assign(model=np.where(data["drop_model"] == "gilbert-elliott", "bursts", "independent"),
                       burst=data["burst"].where(data["drop_model"] == "gilbert-elliott"))
    out = data.groupby(["topology", "method", "model", "burst", "drop"], dropna=False).agg(
        median=(value, "median"), low=(value, "min"), high=(value, "max"), seeds=(value, "count"),
        runs=("run_id", "nunique"), diverged=("status", lambda s: int((s == "diverged").sum())))
    return out.reset_index()


def plot_faults_effect(losses: dict, stragglers: dict, out_stem: Path, *, reference: float | None, ylabel: str,
                       title: str, logs: dict) -> list[Path]:
    """``losses``: topology -> loss_table; ``stragglers``: topology -> bar_table over straggler means;
    ``logs``: topology -> whether that straggler panel has a log time axis."""
    paper_theme()
    rows = [r for r in (losses, stragglers) if r]
    cols = max(len(r) for r in rows)
    fig = plt.figure(figsize=(5.0 * cols + (2.6 if cols == 1 else 0), 4.1 * len(rows) + 0.6))
    grid = fig.add_gridspec(len(rows), cols)
    first, letters = {}, iter("abcdefgh")  # one letter per panel, row by row
    for i, (row, part) in enumerate(zip(rows, ("losses", "stragglers") if losses else ("stragglers",))):
        for j, (topology, table) in enumerate(row.items()):
            ax = fig.add_subplot(grid[i, j], sharey=first.get(part))
            first.setdefault(part, ax)
            if part == "losses":
                plot_losses(ax, table, reference, ylabel)
                ax.set_title(f"({next(letters)}) {topology}: accuracy against lost messages")
            else:
                plot_stragglers(ax, table, logs[topology])
                ax.set_title(f"({next(letters)}) {topology}: time to target against stragglers")
            if j:  # the row shares its value axis: named once, at its left
                ax.set_ylabel("")
    methods = sorted({m for r in rows for t in r.values() for m in t["method"]}, key=method_sort_key)
    bursts = sorted({b for t in losses.values() for b in t.loc[t["model"] == "bursts", "burst"].dropna()})
    unreached = {"diverged" if why == "diverged" else "censored"
                 for t in stragglers.values() for why in t.loc[~np.isfinite(t["median"]), "why"]}
    fig.suptitle(title)
    empty = [(i, j) for i, row in enumerate(rows) for j in range(len(row), cols)]
    add_legends(fig, grid, empty, cols, *legend_handles(methods, bursts, reference is not None, unreached))
    return save_figure(fig, out_stem)


def _percent(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


@figure("8. What do lost messages and slow workers cost?", order=110, needs=needs,
        intervals=("bars: the least to the greatest seed",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The (task, n) with the most runs on an unreliable network; each topology with losses (top) or
    stragglers (bottom), up to MAX_TOPOLOGIES; one cell per method and fault setting."""
    if summary is None or summary.empty:
        return "no summary of the runs"
    why = needs(req.Grid(summary))  # what a study's cells are checked for when its DAG is built
    if why:
        return why
    data = with_methods(iid_only(usable(req.with_faults(summary))))
    faulty = data[req.lossy(data) | req.straggled(data)]
    task, nodes = faulty.groupby(["task", "nodes"]).size().idxmax()
    data = data[(data["task"] == task) & (data["nodes"] == nodes)]
    faulty = faulty[(faulty["task"] == task) & (faulty["nodes"] == nodes)]
    if "network" in data:  # one network preset: the most run with faults
        data = data[data["network"].fillna("default") == faulty["network"].fillna("default").mode().iloc[0]]
    data = one_cell_per(data, KEYS)
    local = "final_local_acc" in data and data.loc[req.lossy(data), "final_local_acc"].notna().any()
    value = "final_local_acc" if local else "final_test_acc"
    data = data.assign(acc=as_percent(pd.to_numeric(data[value], errors="coerce")).to_numpy())
    decentral = data[[not centralized(a) for a in data["algorithm"]]]
    losses = {}
    for topology in _topologies(decentral[req.lossy(decentral)]):
        here = decentral[decentral["topology"] == topology]
        shown = here[here["method"].isin(set(here.loc[req.lossy(here), "method"]))]
        losses[topology] = loss_table(shown[req.lossy(shown) | req.perfect(shown)], "acc")
    ref = data[(data["algorithm"] == REFERENCE) & req.perfect(data)]
    ref_acc = ref["acc"] if ref["acc"].notna().any() else as_percent(ref["final_test_acc"])
    reference = float(ref_acc.median()) if ref_acc.notna().any() else None
    stragglers, logs, times = {}, {}, {"time_to_target_s", "tta_status"} <= set(data.columns)
    if times and data["tta_status"].isin(["reached", "censored", "diverged"]).any():
        for topology in _topologies(data[req.straggled(data)]):
            here = _on(data, topology)
            here = here[here["method"].isin(set(here.loc[req.straggled(here), "method"]))]
            here = here[req.straggled(here) | req.perfect(here)]
            stragglers[topology] = bar_table(here.assign(network=here["straggler_mean"]), ends=run_ends(points))
            logs[topology] = log_axis(stragglers[topology])
    if not losses and not stragglers:
        return "no decentralized run with losses at a rate, and no target accuracy to time the stragglers against"
    ylabel = ("final accuracy of the workers' own\nmodels (%, mean over workers)" if local
              else "final test accuracy of the\naveraged model (%)")
    title = f"Lost messages and slow workers ({task}, n = {nodes})"
    paths = plot_faults_effect(losses, stragglers, out_stem, reference=reference, ylabel=ylabel, title=title,
                               logs=logs)
    return paths, _caption(data, losses, stragglers, logs, reference, local, task, nodes)


def _caption(data, losses, stragglers, logs, reference, local, task, nodes) -> str:
    tables = list(losses.values()) + list(stragglers.values())
    seeds = [int(s) for t in tables for s in t["seeds"] if s > 0]
    most = max(seeds, default=1)
    count = f"{most}" if min(seeds, default=1) == most else f"{min(seeds)}–{most}"
    seed_text = ("1 seed per point (no spread shown)" if most == 1 else
                 f"median over {count} seeds per point; bars: the least to the greatest seed")
    text = [f"What an unreliable network costs on {task} with n = {nodes} workers; {seed_text}."]
    if losses:
        what = ("the paper's metric: the final test accuracy of each worker's own model, averaged over the n "
                "workers" if local else "the final test accuracy of the averaged model (the runs did not score "
                "every worker's own model)")
        drops = sorted({d for t in losses.values() for d in t["drop"] * 100})
        shares = data[req.lossy(data)].groupby("drop")["dropped_share"].median().dropna()
        measured = (f" (measured shares lost: {', '.join(f'{v * 100:.3g}%' for v in shares)} at "
                    f"{_percent(shares.index * 100)}%)" if len(shares) else "")
        ref = (f" The dotted line is all-reduce on a perfect network ({reference:.4g}%)." if reference is not None
               else " No all-reduce run on a perfect network: no reference line.")
        text.append(f"Top row: {what}, against the share of messages each directed link loses per round, "
                    f"{_percent(drops)}%{measured}, on a symmetric-log axis so that 0% (a perfect network) is "
                    "shown. Solid lines and filled markers: each message lost on its own (Bernoulli); dashed, "
                    "hollow: lost in bursts at the same mean rate (Gilbert-Elliott). The series at one x are "
                    f"shifted sideways by at most {SPREAD:g} points around its tick, so that the bars stay apart."
                    + ref)
        diverged = sum(int(t["diverged"].sum()) for t in losses.values())
        if diverged:
            text.append(f"{diverged} run(s) diverged; each counts with its final accuracy where it has one.")
    if stragglers:
        scale = "a log axis, points only (the times span decades)" if any(logs.values()) else "a linear axis from 0"
        missed = [f"{r['method']} at m = {r['network']:g} ({r['status']})" for t in stragglers.values()
                  for _, r in t[~np.isfinite(t["median"])].iterrows()]
        text.append(("Bottom row: m" if losses else "M") + "odelled time to the target accuracy (the α–β cost "
                    "model: a synchronous round waits for "
                    "its slowest worker) against the straggler mean m: at every step each worker's compute takes "
                    "1 + Exp(m) times as long; 0 is the same method on a perfect network. Median over seeds (bars: the "
                    "least to the greatest seed that reached), "
                    f"counting a seed that missed the target as infinite, on {scale}. Where the median seed "
                    "missed it, ↑ marks where those runs ended (the time is beyond) and × a divergence"
                    + (f": {'; '.join(missed)}." if missed else "; every point reached it."))
    other = data[~(req.lossy(data) | req.straggled(data) | req.perfect(data))]
    if len(other):
        text.append(f"Not drawn: {len(other)} run(s) with outages, symmetric losses, a fixed straggler or "
                    "losses and stragglers together.")
    return " ".join(text)
