"""Every method at matched cost: test accuracy against Mbit sent per worker and against modelled time,
one row of panels per data partition (the `methods` study: decentralized compression against
compressed all-reduce with error feedback, on i.i.d. and Dirichlet data)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis.labels import (bits_counts, bits_label, centralized, method_sort_key, style, topology_style,  # noqa: E402
                             with_methods)
from analysis.selection import IID_SCHEMES, usable  # noqa: E402


def _partition_order(schemes) -> list[str]:
    return sorted(schemes, key=lambda s: (s not in IID_SCHEMES, str(s)))


def curves(points: pd.DataFrame) -> pd.DataFrame:
    """Median over seeds per (data, method, topology, step) of accuracy, Mbit and modelled time. A
    method that uses no graph (centralized: all models equal) is kept on one topology only."""
    data = with_methods(usable(points))
    data = data[data["status"] != "diverged"].copy()
    data["acc"] = as_percent(data["test_acc"])
    data["mbit"] = data["bits_per_worker"] / 1e6
    keys = ["data", "method", "topology", "step"]
    med = data.groupby(keys, dropna=False).agg(acc=("acc", "median"), mbit=("mbit", "median"),
                                               time_s=("time_s", "median"), seeds=("run_id", "nunique"))
    med = med.reset_index()
    # a centralized method's runs under two graph names are one method: keep its first topology
    graphless = {m for m, a in zip(data["method"], data["algorithm"]) if centralized(a)}
    first = med.groupby(["data", "method"])["topology"].transform("min")
    return med[~(med["method"].isin(graphless) & (med["topology"] != first))]


def plot_methods(table: pd.DataFrame, out_stem: Path, title: str, bits_axis: str | None = None) -> list[Path]:
    paper_theme()
    schemes = _partition_order(table["data"].dropna().unique())
    methods = sorted(table["method"].unique(), key=method_sort_key)
    topologies = sorted(table["topology"].astype(str).unique())
    fig, axes = plt.subplots(len(schemes), 2, figsize=(13, 3.9 * len(schemes)), sharey="row", squeeze=False)
    for row, scheme in zip(axes, schemes):
        part = table[table["data"] == scheme]
        for (method, topology), g in part.groupby(["method", "topology"]):
            look, lines = style(method), topology_style(topology, topologies)
            g = g.sort_values("step")
            for ax, x in zip(row, ("mbit", "time_s")):
                shown = g[g[x] > 0] if x == "mbit" else g  # log axis: the start sends nothing
                ax.plot(shown[x], shown["acc"], color=look["color"], linestyle=lines["linestyle"], linewidth=1.5,
                        marker=look["marker"], markevery=max(1, len(shown) // 6), markersize=5)
        row[0].set_xscale("log")
        row[0].set_xlabel((bits_axis or bits_label()) + " (log scale)")
        row[1].set_xlabel("modelled time (s)")
        row[0].set_ylabel(f"test accuracy (%)\n{scheme}")
        for ax in row:
            ax.set_title(f"{scheme}: {'bits' if ax is row[0] else 'time'}", fontsize=10)
    handles = [Line2D([], [], color=style(m)["color"], marker=style(m)["marker"], linewidth=1.8, label=m)
               for m in methods]
    if len(topologies) > 1:
        handles += [Line2D([], [], color="0.3", linestyle=topology_style(t, topologies)["linestyle"], linewidth=1.5,
                           label=f"graph: {t}") for t in topologies]
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # half an inch kept for the title above the rows
    return save_figure(fig, out_stem)


@figure("7. Which method wins at matched bits and matched time?", order=100)
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The task, n and network with the most methods (one is enough)."""
    if points is None or points.empty:
        return "no run metrics (metrics.parquet) to draw"
    runs = with_methods(usable(points))
    if runs.empty:
        return "no finished runs"
    counts = runs.groupby(["task", "nodes", "network"])["method"].nunique()
    task, nodes, network = counts.idxmax()
    chosen = runs[(runs["task"] == task) & (runs["nodes"] == nodes) & (runs["network"] == network)]
    table = curves(chosen)
    seeds = table.groupby(["method", "topology", "data"])["seeds"].max()
    bits_axis = bits_label(bits_counts(chosen))
    paths = plot_methods(table, out_stem, f"Every method at matched cost: {task}, n = {nodes}, {network}", bits_axis)
    caption = (f"Test accuracy of the averaged model on {task} with n = {nodes} workers against {bits_axis.lower()} "
               f"(left, log scale: a copy of a message on every link it travels, a collective what it sends on "
               f"each ring link) and against modelled time "
               f"(right: compute plus the α–β model of {network}), one row per data partition. Each line is a "
               f"method (colour and marker, the same in every figure) on a graph (line style); a centralized "
               f"method (all models equal, no graph used) is drawn once. Medians over "
               f"{int(seeds.min())}–{int(seeds.max())} seeds that did not diverge. At matched bits a line further "
               f"left reached its accuracy with less traffic; at matched time, sooner.")
    return paths, caption

