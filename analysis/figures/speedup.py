"""Linear speed-up: one panel per method with the sub-optimality against iterations (one colour per n, one
line style per LR regime) and the theory's leading term c/√(nt); under them, per LR regime, the speed-up to
each target sub-optimality and the noise-floor ratio against n next to the ideal n."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from analysis.display import save_figure  # noqa: E402
from analysis.figures.base import figure, palette, paper_theme  # noqa: E402
from analysis.figures.requirements import Grid  # noqa: E402
from analysis.labels import method_sort_key, style  # noqa: E402
from analysis.selection import usable  # noqa: E402
from analysis.speedup import (CONSTANT, SQRT_N, curves, fit_theory_constant, in_regime, regime_title,  # noqa: E402
                              regimes, speedup_points, speedup_table)

NO_SUBOPTIMALITY = "needs runs with train_subopt (the lsq and logreg tasks record it)"
REGIME_STYLES = ["-", "--", ":", "-."]  # line style of each LR regime in the curve panels, in regimes() order
TARGET_GREYS = ["0.45", "0.7"]  # first and second target sub-optimality


def needs(grid: Grid) -> str | None:
    """A task that records the sub-optimality (lsq, logreg), run at n = 1 (the baseline) and at another n."""
    if grid.metrics is not None and "train_subopt" not in grid.metrics:
        return NO_SUBOPTIMALITY
    runs = usable(grid.cells)
    for _, g in runs.groupby("task"):
        if (g["nodes"] == 1).any() and g["nodes"].nunique() >= 2:
            return None
    return "needs runs at n = 1 (the baseline) and at another n of one task"


def regime_name(regime: str) -> str:
    """A short name for titles and legends."""
    return {CONSTANT: "constant LR", SQRT_N: "LR ∝ √n"}.get(regime, f"LR {regime}")


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


def _curve_panel(ax, points: pd.DataFrame, method: str, regimes_of, nodes, colors, c: float, targets) -> None:
    """The method's median curves, one colour per n and one line style per regime; the shared n = 1
    runs (the same in every regime) once, solid."""
    steps = None
    for k, regime in enumerate(regimes_of):
        inside = in_regime(points, regime)
        curve = curves(inside[inside["method"] == method])
        curve = curve[curve["step"] > 0]  # log-scale iterations: the start is drawn by nothing
        own_one = ((points["lr_regime"] == regime) & (points["nodes"] == 1) & (points["method"] == method)).any()
        for n in nodes:
            m = curve[curve["nodes"] == n]
            if m.empty or (n == 1 and k > 0 and not own_one):
                continue
            steps = m["step"].to_numpy() if steps is None else np.union1d(steps, m["step"])
            linestyle = REGIME_STYLES[k % len(REGIME_STYLES)] if n > 1 or own_one else "-"
            ax.plot(m["step"], m["median"], color=colors[n], linewidth=1.6, linestyle=linestyle,
                    gid=f"curve:{method}:{regime}:{n}")
            ax.fill_between(m["step"], m["low"], m["high"], color=colors[n], alpha=0.1, linewidth=0)
    if steps is not None and math.isfinite(c):
        for n in nodes:
            ax.plot(steps, c / np.sqrt(n * steps), color=colors[n], linestyle=(0, (1, 1.5)), linewidth=1.1,
                    alpha=0.9)
    for k, target in enumerate(targets):
        ax.axhline(target, color=TARGET_GREYS[min(k, len(TARGET_GREYS) - 1)], linestyle="-", linewidth=0.9,
                   zorder=0)
    ax.set_xscale("log")
    ax.set_yscale("log")


def _ratio_panel(ax, table: pd.DataFrame, methods, nodes, looks, quantity: str) -> None:
    """Per method (its look), ``quantity`` against n: "speedup" (each target: filled markers the first,
    hollow the second, with the bootstrap interval) or "floor_ratio"; the ideal n and √n in black."""
    ax.plot(nodes, nodes, color="black", linestyle="--", linewidth=1.1, zorder=1)
    ax.plot(nodes, np.sqrt(nodes), color="black", linestyle=":", linewidth=1.1, zorder=1)
    offsets = dict(zip(methods, np.linspace(-0.06, 0.06, len(methods))))  # keep overlapping bars apart
    factors = list(dict.fromkeys(table["target_factor"]))
    for method in methods:
        rows = table[table["method"] == method]
        look = looks[method]
        if quantity == "floor_ratio":
            f = rows.drop_duplicates("nodes")
            f = f[f["floor_ratio"] > 0].sort_values("nodes")
            ax.plot(f["nodes"] * 2.0 ** offsets[method], f["floor_ratio"], linewidth=1.5, markersize=6,
                    gid=f"floor:{method}", **look)
            continue
        for k, factor in enumerate(factors):
            g = rows[(rows["target_factor"].fillna(-1) == (-1 if pd.isna(factor) else factor))
                     & np.isfinite(rows["speedup"])].sort_values("nodes")
            if g.empty:
                continue
            err = [g["speedup"] - g["speedup_ci_low"], g["speedup_ci_high"] - g["speedup"]]
            bars = ax.errorbar(g["nodes"] * 2.0 ** offsets[method], g["speedup"],
                               yerr=np.clip(np.asarray(err, dtype=float), 0, None), capsize=3, markersize=6,
                               linewidth=1.5 if k == 0 else 1.0, alpha=1.0 if k == 0 else 0.8,
                               markerfacecolor=look["color"] if k == 0 else "white", markeredgewidth=1.3, **look)
            bars.lines[0].set_gid(f"speedup:{method}:{k}")
    if quantity == "speedup":
        missed = table[~np.isfinite(table["speedup"]) & (table["nodes"] > 1)]
        for i, (_, r) in enumerate(missed.iterrows()):
            factor = "" if pd.isna(r["target_factor"]) else f", {r['target_factor']:g}×"
            ax.annotate(f"{r['method']}, n = {r['nodes']}{factor}: {r['status']}", (0.98, 0.03 + 0.07 * i),
                        xycoords="axes fraction", fontsize=8, ha="right", color="0.2")
    ax.set_yscale("log", base=2)
    _log_n_axis(ax, nodes)


def plot_speedup(points: pd.DataFrame, table: pd.DataFrame, out_stem: Path, *, title: str | None = None):
    """``points``: evaluation points of one task (method, nodes, seed, step, train_subopt, lr_regime);
    ``table``: its ``speedup_table``. Top row: one panel per method, the curves of every n (colour) and
    LR regime (line style). Bottom row: per regime, the speed-up to each target and the noise-floor
    ratio against n, each method in its look (labels.style). Returns the paths and the fitted constant c."""
    paper_theme()
    regimes_of = regimes(points)
    methods = sorted(points["method"].unique(), key=method_sort_key)
    nodes = sorted(points["nodes"].unique())
    colors = dict(zip(nodes, palette("viridis_r", len(nodes))))
    looks = {m: style(m) for m in methods}
    shared = curves(in_regime(points, regimes_of[0]))
    c = theory_constant(shared[shared["step"] > 0])  # the n = 1 runs are the same in every regime
    targets = list(dict.fromkeys(table["target"])) if len(table) else []
    columns = max(len(methods), 2 * len(regimes_of))
    fig = plt.figure(figsize=(3.1 * columns + 2.6, 7.4))
    outer = fig.add_gridspec(2, 2, width_ratios=[3.1 * columns, 2.6], height_ratios=[1, 1])
    top = outer[0, 0].subgridspec(1, len(methods))
    bottom = outer[1, 0].subgridspec(1, 2 * len(regimes_of))
    first = None
    for k, method in enumerate(methods):
        ax = fig.add_subplot(top[0, k], sharex=first, sharey=first)
        first = first or ax
        _curve_panel(ax, points, method, regimes_of, nodes, colors, c, targets)
        ax.set_title(method, fontsize=11, color=looks[method]["color"])
        ax.set_xlabel("iterations t")
        if k == 0:
            ax.set_ylabel("f(x̄) − f*  (median over seeds)")
        else:
            ax.tick_params(labelleft=False)
    ratio = None
    for j, (quantity, name) in enumerate((("speedup", "speed-up T(1)/T(n)"), ("floor_ratio", "floor(1)/floor(n)"))):
        for i, regime in enumerate(regimes_of):
            ax = fig.add_subplot(bottom[0, j * len(regimes_of) + i], sharex=ratio, sharey=ratio)
            ratio = ratio or ax
            _ratio_panel(ax, table[table["lr_regime"] == regime], methods, nodes, looks, quantity)
            ax.set_title(f"{name}\n{regime_name(regime)}", fontsize=11)
            ax.set_xlabel("number of workers n")
            if j == 0 and i == 0:
                ax.set_ylabel("ratio to n = 1 (log scale)")
            else:
                ax.tick_params(labelleft=False)
    # the legends sit in a column of their own, beside the row they explain
    handles = [Line2D([], [], color=colors[n], linewidth=2, label=f"n = {n}") for n in nodes]
    handles += [Line2D([], [], color="0.3", linewidth=1.6, linestyle=REGIME_STYLES[k % len(REGIME_STYLES)],
                       label=regime_name(r) + (" (and n = 1)" if k == 0 else "")) for k, r in enumerate(regimes_of)]
    handles.append(Line2D([], [], color="0.3", linestyle=(0, (1, 1.5)), linewidth=1.1, label="c/√(n t), theory"))
    factors = list(dict.fromkeys(table["target_factor"])) if len(table) else []
    for k, (f, target) in enumerate(zip(factors, targets)):
        handles.append(Line2D([], [], color=TARGET_GREYS[min(k, len(TARGET_GREYS) - 1)], linewidth=0.9,
                              label=f"target {f:g}× floor" if not pd.isna(f) else f"target {target:.3g}"))
    legend_top = fig.add_subplot(outer[0, 1])
    legend_top.axis("off")
    legend_top.legend(handles=handles, loc="center left", frameon=False, fontsize=10)
    handles = [Line2D([], [], linewidth=1.5, markersize=6, label=m, **looks[m]) for m in methods]
    for k, f in enumerate(factors[:2]):
        handles.append(Line2D([], [], color="0.3", marker="o", markerfacecolor="0.3" if k == 0 else "white",
                              linestyle="none", markersize=6,
                              label=(f"speed-up to {f:g}× floor" if not pd.isna(f) else "speed-up to the target")))
    handles += [Line2D([], [], color="black", linestyle="--", linewidth=1.1, label="ideal: n"),
                Line2D([], [], color="black", linestyle=":", linewidth=1.1, label="√n")]
    legend_bottom = fig.add_subplot(outer[1, 1])
    legend_bottom.axis("off")
    legend_bottom.legend(handles=handles, loc="center left", frameon=False, fontsize=10)
    fig.suptitle(title or "Sub-optimality against iterations and speed-up against n")
    fig.tight_layout()
    return save_figure(fig, out_stem), c


_STYLE_NAMES = ["solid", "dashed", "dotted", "dash-dotted"]  # REGIME_STYLES in words


def _lr_text(table: pd.DataFrame, regimes_of) -> str:
    """The LR of every method at each n > 1, per regime; once per regime when every method has the same."""
    parts = []
    for regime in regimes_of:
        t = table[(table["lr_regime"] == regime) & (table["nodes"] > 1)].drop_duplicates(["method", "nodes"])
        if t.empty:
            continue
        by_method = {m: ", ".join(f"{v:.3g}" for v in g.sort_values("nodes")["lr"])
                     for m, g in t.groupby("method", sort=False)}
        at = ", ".join(str(n) for n in sorted(t["nodes"].unique()))
        if len(set(by_method.values())) == 1:
            parts.append(f"{regime_name(regime)}: η = {next(iter(by_method.values()))} at n = {at} for every method")
        else:
            listed = "; ".join(f"{m} {v}" for m, v in sorted(by_method.items(), key=lambda kv: method_sort_key(kv[0])))
            parts.append(f"{regime_name(regime)} (η at n = {at}): {listed}")
    return ("Learning rates: " + "; ".join(parts) + ".") if parts else ""


@figure("4. Does training speed up linearly with n?", order=90, needs=needs,
        intervals=("the seed range shaded", "95% bootstrap interval over seeds"))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The task with sub-optimality curves at n = 1 and the most other node counts."""
    data = speedup_points(points)
    if data is None:
        return NO_SUBOPTIMALITY
    # the check a study's cells pass when its DAG is built, here on the runs
    why = needs(Grid(data))
    return why or from_table(data, out_stem)


# speedup_points' columns that from_table reads: what the docs keep of a study (results/baselines), not every one
COLUMNS = ["task", "method", "algorithm", "nodes", "seed", "run_id", "step", "train_subopt", "lr", "lr_regime",
           "status"]


def from_table(data: pd.DataFrame, out_stem: Path):
    """(paths, caption) from speedup_points' rows (COLUMNS at least)."""
    tasks = [(task, g["nodes"].nunique()) for task, g in data.groupby("task") if (g["nodes"] == 1).any()]
    tasks = [t for t in tasks if t[1] >= 2]
    task = max(tasks, key=lambda t: (t[1], t[0]))[0]
    sel = data[data["task"] == task]
    table = speedup_table(sel)
    paths, c = plot_speedup(sel, table, out_stem, title=f"Linear speed-up on {task}")
    targets = "; ".join(f"{v:.3g} ({src})" for v, src in
                        table[["target", "target_source"]].drop_duplicates().itertuples(index=False))
    nodes = ", ".join(str(n) for n in sorted(sel["nodes"].unique()))
    regimes_of = regimes(sel)
    styles = "; ".join(f"{_STYLE_NAMES[k % len(_STYLE_NAMES)]}: {regime_title(r, table[table['lr_regime'] == r])}"
                       for k, r in enumerate(regimes_of))
    caption = (f"Linear speed-up on {task} with a fixed per-worker batch. Top: one panel per method, the "
               "sub-optimality f(x̄) − f* of the averaged model against iterations (log-log), median over seeds "
               f"with the seed range shaded, one colour per number of workers n ({nodes}) and one line style per "
               f"LR regime ({styles}); the n = 1 runs are shared by every regime and drawn once, solid. "
               f"{_lr_text(table, regimes_of)} Dotted: the theory's leading term c/√(nt) for each n, with the single "
               f"constant c = {c:.3g} fitted (slope fixed at −1/2) on the last half of the n = 1 all-reduce curve. "
               f"Grey horizontal lines: the target sub-optimalities ({targets}). Bottom, for each regime: the "
               "speed-up T(n = 1)/T(n) in iterations to reach each target (interpolated crossings, median over "
               "seeds, 95% bootstrap interval over seeds; filled markers: first target, hollow: second), then how "
               "many times lower the noise floor (median sub-optimality over the last quarter of the run) sits "
               "than at n = 1; each method in its colour, marker and line style of every figure, against the "
               "ideal linear speed-up n (dashed) and √n (dotted). Targets missed by the median seed are named in "
               "the panel, not drawn. The theory's η ∝ √(n/T) and its O(1/√(nT)) rate are about the error "
               "at a horizon T: with a constant LR the transient (the linear-rate phase, its length ∝ 1/η) takes "
               "the same iterations at every n and only the floor falls with n; η ∝ √n is expected to shorten "
               "it by about √n, and at a larger η a decentralized method also carries a consensus error that "
               "grows with η and with a smaller spectral gap.")
    return paths, caption
