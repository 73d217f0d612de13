"""Every method at matched cost: test accuracy against Mbit sent per worker and against modelled time (the
`methods` study: decentralized compression against compressed all-reduce with error feedback). Small multiples:
a row per group of at most five compressed methods, in colour, over the exact references and the other
methods in grey; a pair of columns (bits, time) per data partition that every method ran."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis.colours import topology_style  # noqa: E402
from analysis.labels import centralized, exact, method_sort_key, style, with_methods, _METHODS  # noqa: E402
from analysis.noniid import heterogeneity  # noqa: E402
from analysis.selection import IID_SCHEMES, usable  # noqa: E402
from analysis.units import bits_counts, bits_label  # noqa: E402

PER_ROW = 5  # compressed methods in colour in one row of panels: more and their hues blur together
MAX_PARTITIONS = 2  # the i.i.d. one and the non-i.i.d. one run the most; the gap_vs_alpha figure has them all


def _partitions(table: pd.DataFrame) -> list[str]:
    """Of the partitions every method ran (all, if none is shared), i.i.d. first, then those with the most lines
    (methods on graphs: the study's main partition), the most heterogeneous first among equals."""
    ran = table.groupby("method")["data"].agg(lambda s: set(s.dropna()))
    shared = set.intersection(*ran) if len(ran) else set()
    lines = table.groupby("data")[["method", "topology"]].apply(lambda g: len(g.drop_duplicates()))
    schemes = sorted(shared or set(table["data"].dropna()),
                     key=lambda s: (s not in IID_SCHEMES, -lines.get(s, 0), heterogeneity(s)))
    return schemes[:MAX_PARTITIONS]


def _groups(methods: list[str], graphless: set) -> list[list[str]]:
    """Rows of at most PER_ROW compressed methods in legend order: the decentralized ones, then the centralized."""
    def is_exact(m):
        return m in _METHODS and exact(*_METHODS[m])

    rows = []
    for part in ([m for m in methods if not is_exact(m) and m not in graphless],
                 [m for m in methods if not is_exact(m) and m in graphless]):
        rows += [part[i:i + PER_ROW] for i in range(0, len(part), PER_ROW)]
    return rows or [[]]


def curves(points: pd.DataFrame) -> pd.DataFrame:
    """Median, least and greatest over seeds per (data, method, topology, step) of accuracy, and the medians of
    Mbit and modelled time. A method that uses no graph (centralized: all models equal) is kept on one topology."""
    data = with_methods(usable(points))
    data = data[data["status"] != "diverged"].copy()
    data["acc"] = as_percent(data["test_acc"])
    data["mbit"] = data["bits_per_worker"] / 1e6
    keys = ["data", "method", "topology", "step"]
    med = data.groupby(keys, dropna=False).agg(acc=("acc", "median"), low=("acc", "min"), high=("acc", "max"),
                                               mbit=("mbit", "median"), time_s=("time_s", "median"),
                                               seeds=("run_id", "nunique"))
    med = med.reset_index()
    # a centralized method's runs under two graph names are one method: keep its first topology
    graphless = {m for m, a in zip(data["method"], data["algorithm"]) if centralized(a)}
    first = med.groupby(["data", "method"])["topology"].transform("min")
    return med[~(med["method"].isin(graphless) & (med["topology"] != first))]


def _draw_method(ax, g: pd.DataFrame, x: str, look: dict | None, linestyle) -> None:
    """One method's median on one graph: in its look with its seeds' range shaded, or (None) a thin grey line."""
    g = g.sort_values("step")
    g = g[g[x] > 0] if x == "mbit" else g  # log axis: the start sends nothing
    if look is None:
        ax.plot(g[x], g["acc"], color="0.82", linewidth=0.8, linestyle=linestyle, zorder=1)
        return
    ax.plot(g[x], g["acc"], color=look["color"], linestyle=linestyle, linewidth=1.6, marker=look["marker"],
            markevery=max(1, len(g) // 5), markersize=4.5, zorder=3)
    if (g["high"] > g["low"]).any():
        ax.fill_between(g[x], g["low"], g["high"], color=look["color"], alpha=0.15, linewidth=0, zorder=2)


def plot_methods(table: pd.DataFrame, out_stem: Path, title: str, bits_axis: str | None = None,
                 graphless: frozenset = frozenset()) -> list[Path]:
    paper_theme()
    schemes = _partitions(table)
    table = table[table["data"].isin(schemes)]
    methods = sorted(table["method"].unique(), key=method_sort_key)
    groups = _groups(methods, set(graphless))
    references = [m for m in methods if not any(m in g for g in groups)]
    topologies = sorted(table["topology"].astype(str).unique())
    fig, axes = plt.subplots(len(groups), 2 * len(schemes), figsize=(3.3 * 2 * len(schemes) + 2.6,
                                                                     2.9 * len(groups) + 0.6),
                             sharey=True, sharex="col", squeeze=False)
    for row, group in zip(axes, groups):
        for k, scheme in enumerate(schemes):
            part = table[table["data"] == scheme]
            for (method, topology), g in part.groupby(["method", "topology"]):
                shown = method in group or method in references
                lines = topology_style(topology, topologies)["linestyle"]
                for ax, x in zip(row[2 * k:2 * k + 2], ("mbit", "time_s")):
                    look = style(method) if shown else None
                    _draw_method(ax, g, x, look, lines)
            row[2 * k].set_xscale("log")
            for ax, what in zip(row[2 * k:2 * k + 2], ("bits", "time")):
                ax.set_title(f"{scheme}: {what}", fontsize=10)
        row[0].set_ylabel("test accuracy (%)")
        row[-1].legend(handles=[Line2D([], [], color=style(m)["color"], marker=style(m)["marker"],
                                       label=m)
                                for m in references + group], loc="center left", bbox_to_anchor=(1.02, 0.5),
                       frameon=False, fontsize=9)
    for k in range(len(schemes)):
        axes[-1][2 * k].set_xlabel((bits_axis or bits_label()).split(" (")[0] + "\n(log scale)", fontsize=9)
        axes[-1][2 * k + 1].set_xlabel("modelled time (s)", fontsize=9)
    ways = [Line2D([], [], color="0.82", linewidth=0.8, label="the other methods"),
            Patch(color="0.5", alpha=0.3, label="least to greatest over seeds")]
    if len(topologies) > 1:
        ways += [Line2D([], [], color="0.3", linestyle=topology_style(t, topologies)["linestyle"], linewidth=1.5,
                        label=f"graph: {t}") for t in topologies]
    fig.legend(handles=ways, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(ways), frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # half an inch kept for the title above the rows
    return save_figure(fig, out_stem)


@figure("7. Which method wins at matched bits and matched time?", order=100,
        intervals=("the shading the least to the greatest seed",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    if points is None or points.empty:
        return "no run metrics (metrics.parquet) to draw"
    table = table_of(points)
    return "no finished runs" if table.empty else from_table(table, out_stem)


def table_of(points: pd.DataFrame) -> pd.DataFrame:
    """curves() of the task, n and network with the most methods (one is enough), with those three, whether the
    method is centralized and the runs' count of bits as columns: what from_table draws."""
    runs = with_methods(usable(points))
    if runs.empty:
        return pd.DataFrame()
    counts = runs.groupby(["task", "nodes", "network"])["method"].nunique()
    task, nodes, network = counts.idxmax()
    chosen = runs[(runs["task"] == task) & (runs["nodes"] == nodes) & (runs["network"] == network)]
    graphless = {m for m, a in zip(chosen["method"], chosen["algorithm"]) if centralized(a)}
    table = curves(chosen)
    return table.assign(task=task, nodes=nodes, network=network, centralized=table["method"].isin(graphless),
                        bits_count=" ".join(bits_counts(chosen)))


def drawn(table: pd.DataFrame) -> pd.DataFrame:
    """table_of's rows that from_table draws (its partitions): what the docs keep of a study (results/baselines)."""
    return table[table["data"].isin(_partitions(table))]


def from_table(table: pd.DataFrame, out_stem: Path):
    """(paths, caption) from table_of's rows."""
    task, nodes, network = table.iloc[0][["task", "nodes", "network"]]
    graphless = frozenset(table.loc[table["centralized"].astype(bool), "method"])
    schemes = _partitions(table)
    seeds = table[table["data"].isin(schemes)].groupby(["method", "topology", "data"])["seeds"].max()
    bits_axis = bits_label(str(table.iloc[0]["bits_count"]).split())
    paths = plot_methods(table, out_stem, f"Every method at matched cost: {task}, n = {nodes}, {network}", bits_axis,
                         graphless)
    others = sorted(set(table["data"].dropna()) - set(schemes), key=heterogeneity)
    caption = (f"Test accuracy of the averaged model on {task} with n = {nodes} workers against {bits_axis} "
               f"(log scale: a copy of a message on every link it travels, a collective what it sends on "
               f"each ring link) and against modelled time (compute plus the α–β model of {network}), on "
               f"{' and '.join(schemes)} data (a pair of columns each). Each row shows at most {PER_ROW} compressed "
               f"methods in colour (colour and marker the same in every figure; decentralized rows first, then the "
               f"centralized methods, which use no graph and are drawn once), the exact references in black and "
               f"grey, and every other method as a thin grey line; line style tells the graphs apart. Lines are "
               f"medians over {int(seeds.min())}–{int(seeds.max())} seeds that did not diverge, the shading the "
               f"least to the greatest seed. Further left at matched bits: less traffic for the same accuracy; "
               f"at matched time, sooner."
               + (f" Partitions not every method ran ({', '.join(others)}): the gap_vs_alpha figure."
                  if others else ""))
    return paths, caption
