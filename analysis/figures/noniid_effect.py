"""Final accuracy of each method under each data partition (i.i.d. and non-i.i.d.), with intervals
across seeds: one group per method, one colour per partition, one panel per (topology, n)."""
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
from analysis.noniid import noniid_table  # noqa: E402
from analysis.selection import IID_SCHEMES, usable  # noqa: E402

MAX_PANELS = 4


def needs(grid: Grid) -> str | None:
    """One setting (task, topology, n, method) run on >= 2 data partitions."""
    runs = usable(grid.cells)
    partitions = runs.groupby(["task", "topology", "nodes", "algorithm", "compressor"])["data"].nunique()
    if partitions.ge(2).any():
        return None
    return "no setting (task, topology, n, method) was run on two or more data partitions"


def _schemes(table: pd.DataFrame) -> list[str]:
    return sorted(table["data"].unique(), key=lambda s: (s not in IID_SCHEMES, s))


# glyph of each partition: the i.i.d. one filled, the others hollow in shapes of their own
PARTITION_MARKERS = ["s", "^", "D", "v", "P", "X"]


def partition_looks(schemes) -> dict:
    """scheme -> (marker, filled): the i.i.d. partition a filled circle, each other a hollow shape."""
    looks, k = {}, 0
    for scheme in schemes:
        if scheme in IID_SCHEMES:
            looks[scheme] = ("o", True)
        else:
            looks[scheme] = (PARTITION_MARKERS[k % len(PARTITION_MARKERS)], False)
            k += 1
    return looks


def plot_noniid_effect(table: pd.DataFrame, out_stem: Path, *, title: str | None = None) -> list[Path]:
    """``table``: noniid.noniid_table rows of one task. One group per method, in the method's
    colour (labels.style); one glyph per partition (filled: i.i.d., hollow: the others); one panel
    per (topology, n), sharing the accuracy axis."""
    paper_theme()
    panels = list(table.groupby(["topology", "nodes"], sort=True))[:MAX_PANELS]
    schemes = _schemes(table)
    glyphs = partition_looks(schemes)
    width = 0.8 / len(schemes)
    most = max(g["method"].nunique() for _, g in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(7.0, 1.25 * most + 2), 3.4 * len(panels) + 0.4),
                             squeeze=False, sharey=True)
    for ax, ((topology, nodes), g) in zip(axes.flat, panels):
        methods = sorted(g["method"].unique(), key=method_sort_key)
        for j, scheme in enumerate(schemes):
            h = g[g["data"] == scheme].set_index("method").reindex(methods)
            x = np.arange(len(methods)) + (j - (len(schemes) - 1) / 2) * width
            lo = (h["acc"] - h["acc_ci_low"]).fillna(0).clip(lower=0)
            hi = (h["acc_ci_high"] - h["acc"]).fillna(0).clip(lower=0)
            marker, filled = glyphs[scheme]
            for xi, method, y, l, u in zip(x, methods, h["acc"], lo, hi):
                color = style(method)["color"]
                bars = ax.errorbar([xi], [y], yerr=[[l], [u]], fmt=marker, color=color, capsize=3, markersize=7,
                                   markerfacecolor=color if filled else "white", markeredgewidth=1.5)
                bars.lines[0].set_gid(f"{scheme}:{method}")
            for xi, method, (_, r) in zip(x, methods, h.iterrows()):
                if pd.notna(r["diverged"]) and r["diverged"] > 0:
                    y = r["acc"] if pd.notna(r["acc"]) else ax.get_ylim()[0]
                    ax.annotate(f"{int(r['diverged'])}/{int(r['seeds'])} div.", (xi, y), textcoords="offset points",
                                xytext=(0, -15), ha="center", fontsize=8, color=style(method)["color"])
        ax.set_xticks(np.arange(len(methods)))
        ax.set_xticklabels([m.replace(" (", "\n(") for m in methods], fontsize=9)
        for label, method in zip(ax.get_xticklabels(), methods):
            label.set_color(style(method)["color"])
        ax.set_xlim(-0.6, len(methods) - 0.4)
        ax.set_ylabel("final test accuracy (%)")
        ax.set_title(f"{topology}, n = {nodes}")
    handles = [plt.Line2D([], [], color="0.3", marker=glyphs[s][0], markerfacecolor="0.3" if glyphs[s][1] else "white",
                          markeredgewidth=1.5, markersize=7, linestyle="none", label=s) for s in schemes]
    fig.suptitle(title or "Final accuracy by data partition")
    fig.tight_layout()
    fig.legend(handles=handles, title="data partition", loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=len(handles), frameon=False, fontsize=10)
    return save_figure(fig, out_stem)


@figure("5. What does non-i.i.d. data cost?", order=70, needs=needs, intervals=("95% t-interval",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The task with the most settings run on >= 2 data partitions."""
    if summary is None or summary.empty or "data" not in summary:
        return "no summary with a data partition column"
    # the check a study's cells pass when its DAG is built, here on the runs
    why = needs(Grid(summary))
    if why:
        return why
    return from_table(noniid_table(summary), out_stem)


def from_table(table: pd.DataFrame, out_stem: Path):
    """(paths, caption) from noniid.noniid_table's rows (a study's noniid.csv): the task with the most of them."""
    task = table.groupby("task").size().idxmax()
    table = table[table["task"] == task]
    paths = plot_noniid_effect(table, out_stem, title=f"Final accuracy by data partition ({task})")
    deltas = table[(table["data"] != table["iid_data"]) & table["delta"].notna()]
    worst = deltas.sort_values("delta").head(3)
    worst_text = "; ".join(f"{r['method']} ({r['topology']}, n = {r['nodes']}) on {r['data']}: "
                           f"{r['delta']:+.1f} pp" for _, r in worst.iterrows())
    steps = table.groupby("data")["steps_per_epoch"].median()
    steps_text = ", ".join(f"{s}: {v:g}" for s, v in steps.items() if np.isfinite(v))
    caption = (f"Effect of the data partition on {task}: final test accuracy of the averaged model per method "
               "(groups, in the method's colour) and partition (glyphs: filled the i.i.d. one, hollow the "
               "others), mean over the seeds that did not diverge with a 95% t-interval; one panel per topology "
               "and n, sharing the accuracy axis. shuffle: every worker's data redealt i.i.d. each epoch; sorted: "
               "label-sorted blocks dealt once (one or two classes per worker); dirichlet:α: class shares per "
               "worker drawn from Dirichlet(α) once. Decentralized methods only see other classes through "
               "gossip, so a partition effect beyond all-reduce's own shows the cost of heterogeneity. Largest "
               f"drops against the i.i.d. partition: {worst_text or 'none'}. Median synchronous steps per epoch "
               f"({steps_text or 'not recorded'}): one pass at the mean shard size under every partition. Diverged "
               "seeds are counted under their point.")
    return paths, caption
