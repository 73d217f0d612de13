"""Linear speed-up: sub-optimality against iterations per n (one panel per method) with the theory's
leading term c/√(nt) dashed, and the speed-up to a target sub-optimality against n next to the ideal n."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from analysis.figures import method_sort_key, save_figure  # noqa: E402
from analysis.speedup import curves, fit_theory_constant, speedup_points, speedup_table  # noqa: E402


def _log_n_axis(ax, nodes) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(nodes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(n) for n in nodes])


def theory_constant(curve: pd.DataFrame) -> float:
    """c of c/√t on the tail (last half) of the n = 1 all-reduce median curve (any n = 1 method without one)."""
    one = curve[curve["nodes"] == 1]
    ref = one[one["method"] == "all-reduce"] if (one["method"] == "all-reduce").any() else one
    ref = ref.groupby("step")["median"].median().reset_index()
    return fit_theory_constant(ref["step"], ref["median"])


def plot_speedup(points: pd.DataFrame, table: pd.DataFrame, out_stem: Path, *, title: str | None = None):
    """``points``: evaluation points of one task (method, nodes, seed, step, train_subopt); ``table``:
    its ``speedup_table``. Returns the paths and the fitted constant c."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    curve = curves(points)
    curve = curve[curve["step"] > 0]  # log-scale iterations: the start is drawn by nothing
    methods = sorted(curve["method"].unique(), key=method_sort_key)
    nodes = sorted(curve["nodes"].unique())
    colors = dict(zip(nodes, sns.color_palette("viridis_r", len(nodes))))
    c = theory_constant(curve)
    cols = min(2, len(methods))
    rows = -(-len(methods) // cols)
    fig = plt.figure(figsize=(4.3 * cols + 5.2, 3.5 * rows + 0.6))
    grid = fig.add_gridspec(rows, cols + 1, width_ratios=[1] * cols + [1.25])
    first = None
    steps = np.unique(curve["step"])
    for k, method in enumerate(methods):
        ax = fig.add_subplot(grid[k // cols, k % cols], sharex=first, sharey=first)
        first = first or ax
        for n in nodes:
            m = curve[(curve["method"] == method) & (curve["nodes"] == n)]
            if m.empty:
                continue
            ax.plot(m["step"], m["median"], color=colors[n], linewidth=1.5)
            ax.fill_between(m["step"], m["low"], m["high"], color=colors[n], alpha=0.15, linewidth=0)
            if math.isfinite(c):
                ax.plot(steps, c / np.sqrt(n * steps), color=colors[n], linestyle="--", linewidth=1.0, alpha=0.9)
        target = table["target"].iloc[0]
        if math.isfinite(target):
            ax.axhline(target, color="grey", linestyle=":", linewidth=1.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(method)
        if k % cols == 0:
            ax.set_ylabel("f(x̄) − f*  (median over seeds)")
        if k // cols == rows - 1 or k + cols >= len(methods):
            ax.set_xlabel("iterations t")
    handles = [Line2D([], [], color=colors[n], linewidth=1.8, label=f"n = {n}") for n in nodes]
    handles += [Line2D([], [], color="black", linestyle="--", linewidth=1.0, label="c/√(n t)"),
                Line2D([], [], color="grey", linestyle=":", linewidth=1.2, label="target")]
    first.legend(handles=handles, fontsize=8, loc="lower left")

    ax = fig.add_subplot(grid[:, cols])
    palette = dict(zip(methods, sns.color_palette("tab10", len(methods))))
    markers = dict(zip(methods, "osD^v<>p"))
    ax.plot(nodes, nodes, color="black", linestyle="--", linewidth=1.2, label="ideal (linear)")
    offsets = dict(zip(methods, np.linspace(-0.06, 0.06, len(methods))))  # keep overlapping bars apart
    for method in methods:
        g = table[(table["method"] == method) & np.isfinite(table["speedup"])].sort_values("nodes")
        if g.empty:
            continue
        x = g["nodes"] * 2.0 ** offsets[method]
        err = [g["speedup"] - g["speedup_ci_low"], g["speedup_ci_high"] - g["speedup"]]
        ax.errorbar(x, g["speedup"], yerr=np.clip(np.asarray(err, dtype=float), 0, None), color=palette[method],
                    marker=markers[method], capsize=3, linewidth=1.5, label=method)
        # the other face of the same effect: how much lower the noise floor sits than at n = 1
        f = table[(table["method"] == method) & (table["floor_ratio"] > 0)].sort_values("nodes")
        ax.plot(f["nodes"] * 2.0 ** offsets[method], f["floor_ratio"], color=palette[method], linestyle=":",
                marker=markers[method], markerfacecolor="white", linewidth=1.2)
    missed = table[~np.isfinite(table["speedup"]) & (table["nodes"] > 1)]
    for _, r in missed.iterrows():
        ax.annotate(f"{r['method']}: {r['status']}", (r["nodes"], 1), fontsize=7, xytext=(0, -12),
                    textcoords="offset points", ha="center", color=palette.get(r["method"], "grey"))
    ax.set_yscale("log", base=2)
    _log_n_axis(ax, nodes)
    ax.set_xlabel("number of workers n")
    ax.set_ylabel("ratio to n = 1")
    ax.set_title("speed-up against n")
    kinds = [Line2D([], [], color="grey", marker="o", linewidth=1.5, label="iterations to target T(1)/T(n)"),
             Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle=":", linewidth=1.2,
                    label="noise floor floor(1)/floor(n)")]
    legend = ax.legend(fontsize=8, loc="upper left")
    ax.add_artist(legend)
    ax.legend(handles=kinds, fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 0.80))
    fig.suptitle(title or "Sub-optimality against iterations and speed-up against n")
    fig.tight_layout()
    return save_figure(fig, out_stem), c


def draw(run_dir: Path, points, summary, out_stem: Path):
    """The task with sub-optimality curves at n = 1 and the most other node counts."""
    data = speedup_points(points)
    if data is None:
        return "no runs with train_subopt (the lsq and logreg tasks record it)"
    tasks = [(task, g["nodes"].nunique()) for task, g in data.groupby("task") if (g["nodes"] == 1).any()]
    tasks = [t for t in tasks if t[1] >= 2]
    if not tasks:
        return "needs runs at n = 1 (the baseline) and at another n of one task"
    task = max(tasks, key=lambda t: (t[1], t[0]))[0]
    sel = data[data["task"] == task]
    table = speedup_table(sel)
    paths, c = plot_speedup(sel, table, out_stem, title=f"Linear speed-up on {task}")
    target, source = table["target"].iloc[0], table["target_source"].iloc[0]
    nodes = ", ".join(str(n) for n in sorted(sel["nodes"].unique()))
    caption = (f"Linear speed-up on {task} with a fixed per-worker batch. Left: sub-optimality f(x̄) − f* of the "
               f"averaged model against iterations (log-log), median over seeds with the seed range shaded, one "
               f"colour per number of workers n ({nodes}) and one panel per method. Dashed: the theory's leading "
               f"term c/√(nt) for each n, with the single constant c = {c:.3g} fitted (slope fixed at −1/2) on "
               "the last half of the n = 1 all-reduce curve. Dotted: the target sub-optimality "
               f"{target:.3g} ({source}). Right: speed-up T(n = 1)/T(n) in iterations to reach the target "
               "(interpolated crossings, median over seeds, 95% bootstrap interval over seeds), against the ideal "
               "linear speed-up n; dotted with hollow markers: how many times lower the noise floor (median "
               "sub-optimality over the last quarter of the run) sits than at n = 1. The theory (O(1/√(nT)) leading term, as centralized SGD) expects the curves "
               "to drop by √n at a given t and the speed-up to follow n once that term dominates; a constant LR "
               "shared by every n shows it as a noise floor that shrinks with n rather than as faster early "
               "progress. Points whose median seed missed the target are named at the bottom, not drawn.")
    return paths, caption
