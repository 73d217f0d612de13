"""Linear speed-up: one row of panels per LR regime, with the sub-optimality against iterations per n (one
panel per method) and the theory's leading term c/√(nt) dashed, then the speed-up to each target
sub-optimality and the noise-floor ratio against n next to the ideal n."""
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

from analysis.figures import save_figure  # noqa: E402
from analysis.labels import colours, method_sort_key, style  # noqa: E402
from analysis.speedup import (curves, fit_theory_constant, in_regime, regime_title, regimes,  # noqa: E402
                              speedup_points, speedup_table)


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


TARGET_STYLES = ["-", "-.", (0, (5, 1.5, 1, 1.5, 1, 1.5))]  # first, second, third target


def _curve_panel(ax, curve: pd.DataFrame, method: str, nodes, colors, c: float, targets) -> None:
    steps = np.unique(curve["step"])
    for n in nodes:
        m = curve[(curve["method"] == method) & (curve["nodes"] == n)]
        if m.empty:
            continue
        ax.plot(m["step"], m["median"], color=colors[n], linewidth=1.5)
        ax.fill_between(m["step"], m["low"], m["high"], color=colors[n], alpha=0.15, linewidth=0)
        if math.isfinite(c):
            ax.plot(steps, c / np.sqrt(n * steps), color=colors[n], linestyle="--", linewidth=1.0, alpha=0.9)
    for k, target in enumerate(targets):
        ax.axhline(target, color="grey", linestyle=":" if k == 0 else (0, (1, 4)), linewidth=1.2)
    ax.set_xscale("log")
    ax.set_yscale("log")


def _speedup_panel(ax, table: pd.DataFrame, methods, nodes, palette, markers) -> None:
    ax.plot(nodes, nodes, color="black", linestyle="--", linewidth=1.2, label="ideal (linear)")
    ax.plot(nodes, np.sqrt(nodes), color="black", linestyle=":", linewidth=1.0, label="√n")
    offsets = dict(zip(methods, np.linspace(-0.06, 0.06, len(methods))))  # keep overlapping bars apart
    factors = list(dict.fromkeys(table["target_factor"]))
    for method in methods:
        rows = table[table["method"] == method]
        for k, factor in enumerate(factors):
            g = rows[(rows["target_factor"].fillna(-1) == (-1 if pd.isna(factor) else factor))
                     & np.isfinite(rows["speedup"])].sort_values("nodes")
            if g.empty:
                continue
            err = [g["speedup"] - g["speedup_ci_low"], g["speedup_ci_high"] - g["speedup"]]
            ax.errorbar(g["nodes"] * 2.0 ** offsets[method], g["speedup"],
                        yerr=np.clip(np.asarray(err, dtype=float), 0, None), color=palette[method],
                        marker=markers[method], capsize=3, linewidth=1.5 if k == 0 else 1.1,
                        linestyle=TARGET_STYLES[k % len(TARGET_STYLES)], label=method if k == 0 else None)
        # the other face of the same effect: how much lower the noise floor sits than at n = 1
        f = rows.drop_duplicates("nodes")
        f = f[f["floor_ratio"] > 0].sort_values("nodes")
        ax.plot(f["nodes"] * 2.0 ** offsets[method], f["floor_ratio"], color=palette[method], linestyle=":",
                marker=markers[method], markerfacecolor="white", linewidth=1.0)
    missed = table[~np.isfinite(table["speedup"]) & (table["nodes"] > 1)]
    for i, (_, r) in enumerate(missed.iterrows()):
        label = f"{r['method']}, n = {r['nodes']}, {r['target_factor']:g}×: {r['status']}"
        ax.annotate(label, (0.98, 0.03 + 0.06 * i), xycoords="axes fraction", fontsize=7, ha="right",
                    color=palette.get(r["method"], "grey"))
    ax.set_yscale("log", base=2)
    _log_n_axis(ax, nodes)


def plot_speedup(points: pd.DataFrame, table: pd.DataFrame, out_stem: Path, *, title: str | None = None):
    """``points``: evaluation points of one task (method, nodes, seed, step, train_subopt, lr_regime);
    ``table``: its ``speedup_table``. One row of panels per LR regime. Returns the paths and the
    fitted constant c."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    rows_of = regimes(points)
    methods = sorted(points["method"].unique(), key=method_sort_key)
    nodes = sorted(points["nodes"].unique())
    colors = dict(zip(nodes, sns.color_palette("viridis_r", len(nodes))))
    palette = colours(methods)
    markers = {m: style(m)["marker"] for m in methods}
    shared = curves(in_regime(points, rows_of[0]))
    c = theory_constant(shared[shared["step"] > 0])  # the n = 1 runs are the same in every regime
    cols = len(methods)
    fig = plt.figure(figsize=(3.6 * cols + 5.0, 3.4 * len(rows_of) + 0.8))
    grid = fig.add_gridspec(len(rows_of), cols + 1, width_ratios=[1] * cols + [1.35])
    first = first_ratio = None
    for i, regime in enumerate(rows_of):
        curve = curves(in_regime(points, regime))
        curve = curve[curve["step"] > 0]  # log-scale iterations: the start is drawn by nothing
        t = table[table["lr_regime"] == regime]
        targets = list(dict.fromkeys(t["target"]))
        for k, method in enumerate(methods):
            ax = fig.add_subplot(grid[i, k], sharex=first, sharey=first)
            first = first or ax
            _curve_panel(ax, curve, method, nodes, colors, c, targets)
            lrs = t[(t["method"] == method) & (t["nodes"] > 1)].drop_duplicates("nodes")
            lr_text = ", ".join(f"{v:.3g}" for v in lrs["lr"])
            ax.set_title(f"{method}\nη (n > 1) = {lr_text}" if lr_text else method, fontsize=9)
            if k == 0:
                ax.set_ylabel(f"{regime} LR\nf(x̄) − f*  (median over seeds)")
            if i == len(rows_of) - 1:
                ax.set_xlabel("iterations t")
        ax = fig.add_subplot(grid[i, cols], sharey=first_ratio)
        first_ratio = first_ratio or ax
        _speedup_panel(ax, t, methods, nodes, palette, markers)
        ax.set_ylabel("ratio to n = 1")
        ax.set_title(regime_title(regime, t).split(":")[0] + ": ratios against n", fontsize=9)
        if i == len(rows_of) - 1:
            ax.set_xlabel("number of workers n")
    handles = [Line2D([], [], color=colors[n], linewidth=1.8, label=f"n = {n}") for n in nodes]
    handles += [Line2D([], [], color="black", linestyle="--", linewidth=1.0, label="c/√(n t)"),
                Line2D([], [], color="grey", linestyle=":", linewidth=1.2, label="targets")]
    first.legend(handles=handles, fontsize=7, loc="lower left")
    legend = first_ratio.legend(fontsize=7, loc="upper left")
    first_ratio.add_artist(legend)
    factors = list(dict.fromkeys(table["target_factor"]))
    kinds = [Line2D([], [], color="grey", marker="o", linestyle=TARGET_STYLES[k % len(TARGET_STYLES)],
                    label=f"T(1)/T(n) to {f:g}× floor" if not pd.isna(f) else "T(1)/T(n)")
             for k, f in enumerate(factors)]
    kinds.append(Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle=":",
                        label="floor(1)/floor(n)"))
    first_ratio.legend(handles=kinds, fontsize=7, loc="upper left", bbox_to_anchor=(0.0, 0.62))
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
    targets = "; ".join(f"{v:.3g} ({src})" for v, src in
                        table[["target", "target_source"]].drop_duplicates().itertuples(index=False))
    nodes = ", ".join(str(n) for n in sorted(sel["nodes"].unique()))
    rows = "; ".join(f"row {i + 1}: {regime_title(r, table[table['lr_regime'] == r])}"
                     for i, r in enumerate(regimes(sel)))
    caption = (f"Linear speed-up on {task} with a fixed per-worker batch, one row of panels per LR regime ({rows}); "
               "the n = 1 runs are the same in every row. Left: sub-optimality f(x̄) − f* of the averaged model "
               "against iterations (log-log), median over seeds with the seed range shaded, one colour per number "
               f"of workers n ({nodes}) and one panel per method, titled with its LR at n > 1. Dashed: the "
               f"theory's leading term c/√(nt) for each n, with the single constant c = {c:.3g} fitted (slope "
               "fixed at −1/2) on the last half of the n = 1 all-reduce curve. Dotted: the target "
               f"sub-optimalities ({targets}). Right: speed-up T(n = 1)/T(n) in iterations to reach each target "
               "(interpolated crossings, median over seeds, 95% bootstrap interval over seeds; solid: first "
               "target, dash-dotted: second), against the ideal linear speed-up n (dashed) and √n (dotted); "
               "dotted with hollow markers: how many times lower the noise floor (median sub-optimality over "
               "the last quarter of the run) sits than at n = 1. Targets missed by the median seed are named "
               "in the panel, not drawn. The theory's η ∝ √(n/T) and its O(1/√(nT)) rate are about the error "
               "at a horizon T: with a constant LR the transient (the linear-rate phase, its length ∝ 1/η) takes "
               "the same iterations at every n and only the floor falls with n; η ∝ √n is expected to shorten "
               "it by about √n, and at a larger η a decentralized method also carries a consensus error that "
               "grows with η and with a smaller spectral gap.")
    return paths, caption
