"""Each method's gap to all-reduce SGD against the heterogeneity of the data: one line per method across the
data partitions it ran, from the most skewed (sorted blocks, then dirichlet:α by increasing α) to i.i.d., with
Welch intervals over the seeds of both; one panel per (topology, n)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.display import save_figure  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis.figures.requirements import Grid  # noqa: E402
from analysis.labels import method_sort_key, style  # noqa: E402
from analysis.noniid import gap_table, heterogeneity  # noqa: E402
from analysis.selection import IID_SCHEMES, REFERENCE, usable  # noqa: E402

MAX_PANELS = 4


def needs(grid: Grid) -> str | None:
    """A method and all-reduce run on the same task, n and >= 2 data partitions."""
    runs = usable(grid.cells)
    runs = runs.assign(data=runs["data"].astype(str))
    ref = set(map(tuple, runs.loc[runs["algorithm"] == REFERENCE, ["task", "nodes", "data"]].drop_duplicates()
                  .itertuples(index=False)))
    others = runs[runs["algorithm"] != REFERENCE]
    # a boolean array, not a list: an empty list would select no columns rather than no rows
    shared = others[np.array([key in ref for key in zip(others["task"], others["nodes"], others["data"])], bool)]
    if shared.groupby(["task", "topology", "nodes", "algorithm", "compressor"])["data"].nunique().ge(2).any():
        return None
    return ("needs a method and all-reduce run on the same task, n and two or more data partitions "
            "(e.g. dirichlet:0.1 and shuffle)")


def partition_label(scheme: str) -> str:
    if scheme in IID_SCHEMES:
        return f"i.i.d.\n({scheme})"
    name, _, arg = scheme.partition(":")
    return f"α = {arg}" if name == "dirichlet" else scheme


def plot_gap_vs_alpha(table: pd.DataFrame, out_stem: Path, *, title: str | None = None) -> list[Path]:
    """``table``: noniid.gap_table rows of one task. The partitions on a shared categorical axis, most
    heterogeneous on the left; a dashed line at no gap."""
    paper_theme()
    panels = list(table.groupby(["topology", "nodes"], sort=True))[:MAX_PANELS]
    every = sorted(table["data"].unique(), key=heterogeneity)
    widest = max(g["data"].nunique() for _, g in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(5.5, 1.1 * widest + 2.5) * len(panels), 4.4),
                             squeeze=False, sharey=True)
    methods_all = sorted(table["method"].unique(), key=method_sort_key)
    for ax, ((topology, nodes), g) in zip(axes.flat, panels):
        # a panel's own partitions only (no empty columns); a method missing one has a gap there, not a line across
        schemes = [s for s in every if s in set(g["data"])]
        for k, method in enumerate(m for m in methods_all if m in set(g["method"])):
            h = g[g["method"] == method].drop_duplicates("data").set_index("data").reindex(schemes)
            x = np.arange(len(schemes)) + (k - len(methods_all) / 2) * 0.03
            lo = (h["gap"] - h["gap_ci_low"]).fillna(0).clip(lower=0)
            hi = (h["gap_ci_high"] - h["gap"]).fillna(0).clip(lower=0)
            look = style(method)
            bars = ax.errorbar(x, h["gap"], yerr=[lo, hi], color=look["color"], marker=look["marker"],
                               linestyle=look["linestyle"], capsize=3, markersize=6, label=method)
            bars.lines[0].set_gid(f"gap:{method}")
        ax.axhline(0.0, color="0.4", linewidth=1, linestyle=":")
        ax.set_xticks(range(len(schemes)))
        ax.set_xticklabels([partition_label(s) for s in schemes], fontsize=9)
        ax.set_xlim(-0.5, len(schemes) - 0.5)
        ax.set_xlabel("data partition (more heterogeneous on the left)")
        missing = [partition_label(s).replace("\n", " ") for s in every if s not in schemes]
        ax.set_title(f"{topology}, n = {nodes}" + (f"\n(not run here: {', '.join(missing)})" if missing else ""))
    axes.flat[0].set_ylabel("gap to all-reduce (pp, higher is worse)")
    # every method of every panel, once, in the methods' order: a method absent from the first panel (the
    # centralized ones run on the ring only, say) keeps its entry
    found = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    labels = [m for m in methods_all if m in found]
    handles = [found[m] for m in labels]
    fig.suptitle(title or "Gap to all-reduce SGD by data heterogeneity")
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(labels)),
               frameon=False, fontsize=9)
    return save_figure(fig, out_stem)


@figure("5. What does non-i.i.d. data cost?", order=72, needs=needs, intervals=("Welch's 95% interval",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The task with the most (method, partition) gaps."""
    if summary is None or summary.empty or "data" not in summary:
        return "no summary with a data partition column"
    why = needs(Grid(summary))
    if why:
        return why
    return from_table(gap_table(summary), out_stem)


def from_table(table: pd.DataFrame, out_stem: Path):
    """(paths, caption) from noniid.gap_table's rows (of a study's summary.csv): the task with the most of them."""
    table = table[table.groupby(["task", "topology", "nodes", "method"])["data"].transform("nunique") >= 2]
    task = table.groupby("task").size().idxmax()
    table = table[table["task"] == task]
    paths = plot_gap_vs_alpha(table, out_stem, title=f"Gap to all-reduce SGD by data heterogeneity ({task})")
    lines = []
    for (topology, nodes, method), g in table.groupby(["topology", "nodes", "method"], sort=True):
        g = g.sort_values("data", key=lambda s: s.map(heterogeneity))
        first, last = g.iloc[0], g.iloc[-1]
        lines.append((abs(first["gap"] - last["gap"]), f"{method} ({topology}, n = {nodes}): {first['gap']:+.1f} pp "
                      f"on {first['data']}, {last['gap']:+.1f} pp on {last['data']}"))
    widest = "; ".join(text for _, text in sorted(lines, reverse=True)[:3])
    caption = (f"Gap to all-reduce SGD on {task} against the data partition: all-reduce's mean final test accuracy "
               "on the same partition and n minus the method's (percentage points; above the dotted line the "
               "method is worse), with Welch's 95% interval over both sets of seeds; diverged seeds left out. "
               "The partitions run from the most heterogeneous (sorted: one or two classes per worker; "
               "dirichlet:α, each worker's class shares drawn from Dirichlet(α), fewer classes per worker as α "
               "falls) to i.i.d. on the right; the axis is ordered, not to scale in α. Gradient tracking and "
               "exact-diffusion methods (BEER, CEDAS, LEAD, DoCoM, MoTEF) are built to keep their gap flat as α "
               f"falls. Widest changes across the partitions: {widest or 'none'}.")
    return paths, caption
