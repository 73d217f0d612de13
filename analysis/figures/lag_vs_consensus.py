"""Final accuracy gap to all-reduce SGD against the consensus distance kept during training, across
node counts, topologies and methods, with the fitted power law and its confidence band."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from analysis.display import save_figure  # noqa: E402
from analysis.figures.base import figure, palette, paper_theme  # noqa: E402
from analysis.figures.requirements import Grid  # noqa: E402
from analysis.colours import topology_style  # noqa: E402
from analysis.labels import method_sort_key, style  # noqa: E402
from analysis.lag import fit_band, fit_lag, lag_table  # noqa: E402
from analysis.selection import IID_SCHEMES, REFERENCE, usable  # noqa: E402

MAX_PANELS = 4
MIN_FIT = 3  # settings with a positive gap a power law needs: through one or two points any line "fits"
COLUMNS = 2  # panels per row: four partitions side by side made a figure of 3,000 px and tiny text


def needs(grid: Grid) -> str | None:
    """>= 2 decentralized settings (method, topology, n) with an all-reduce run at the same task, data and
    n, in one data partition: a fit of the gap against the consensus distance needs two points."""
    runs = usable(grid.cells)
    keys = ["task", "data", "nodes"]
    ref = runs.loc[runs["algorithm"] == REFERENCE, keys].drop_duplicates()
    dec = runs[runs["algorithm"] != REFERENCE].merge(ref, on=keys)
    settings = dec.drop_duplicates(["task", "data", "algorithm", "compressor", "topology", "nodes"])
    if settings.groupby(["task", "data"]).size().ge(2).any():
        return None
    return ("needs >= 2 settings (method, topology, n) of decentralized runs with an all-reduce run at the "
            "same task, data and n")


def _fit_or_none(table: pd.DataFrame):
    positive = (pd.to_numeric(table["gap"], errors="coerce") > 0) & (pd.to_numeric(table["consensus"],
                                                                               errors="coerce") > 0)
    if positive.sum() < MIN_FIT:
        return None
    try:
        return fit_lag(table)
    except ValueError:
        return None


def _fit_text(fit) -> str:
    if fit is None:
        return f"no fit (needs {MIN_FIT} settings with a gap > 0)"
    ci = (f"b 95% CI [{fit['ci_low']:.2f}, {fit['ci_high']:.2f}], " if np.isfinite(fit["ci_low"]) else "")
    return f"gap ≈ {fit['a']:.3g}·Ξ^{fit['slope']:.2f}\n{ci}R² = {fit['r2']:.2f}, {fit['n']} pts"


def plot_lag_vs_consensus(table: pd.DataFrame, out_stem: Path, *, title: str | None = None) -> list[Path]:
    """``table``: lag.lag_table rows of one task (one panel per data partition). Colour: n; marker:
    topology (colours.topology_style), filled where the point enters the log fit, hollow (in the
    shaded band under 0) where its gap is ≤ 0; each point labelled with its method, framed in the
    method's colour (labels.style), when several methods are present."""
    paper_theme()
    schemes = sorted(table["data"].astype(str).unique(), key=lambda s: (s not in IID_SCHEMES, s))[:MAX_PANELS]
    nodes = sorted(table["nodes"].unique())
    colours = dict(zip(nodes, palette("viridis", len(nodes))))
    topologies = sorted(table["topology"].astype(str).unique())
    markers = {t: topology_style(t, topologies)["marker"] for t in topologies}
    # the most common method goes unlabelled (the caption names it); the others carry a short label
    common = table["method"].value_counts().sort_index().idxmax()
    ncols = min(COLUMNS, len(schemes))
    nrows = -(-len(schemes) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 4.6 * nrows), squeeze=False, sharey=True)
    for ax in axes.flat[len(schemes):]:
        ax.remove()
    axes = np.array(axes.flat[:len(schemes)])
    for ax, scheme in zip(axes.flat, schemes):
        g = table[(table["data"].astype(str) == scheme) & np.isfinite(table["consensus"]) & np.isfinite(table["gap"])]
        labelled = 0
        for _, r in g.sort_values("consensus").iterrows():
            fitted = r["gap"] > 0 and r["consensus"] > 0
            ax.scatter(r["consensus"], r["gap"], s=55, marker=markers[str(r["topology"])], zorder=3,
                       facecolor=colours[r["nodes"]] if fitted else "white", edgecolor=colours[r["nodes"]],
                       linewidth=1.6, gid=f"{'fitted' if fitted else 'unfitted'}:{r['topology']}:{r['nodes']}")
            if r["method"] != common:
                # alternate above and below so neighbours at similar Ξ do not print over each other
                ax.annotate(r["method"], (r["consensus"], r["gap"]), textcoords="offset points", fontsize=8,
                            xytext=(7, 7 if labelled % 2 == 0 else -14), color="0.15",
                            bbox=dict(boxstyle="round,pad=0.25", facecolor="white", alpha=0.85, linewidth=1.3,
                                      edgecolor=style(r["method"])["color"]))
                labelled += 1
        fit = _fit_or_none(g)
        if fit is not None:
            kept = g[(g["gap"] > 0) & (g["consensus"] > 0)]["consensus"]
            xs = np.geomspace(kept.min(), kept.max(), 100)
            centre, lo, hi = fit_band(fit, xs)
            ax.plot(xs, centre, color="firebrick", linewidth=1.6, label="fit a·Ξ^b")
            if np.isfinite(lo).all():
                ax.fill_between(xs, lo, hi, color="firebrick", alpha=0.15, linewidth=0, label="95% band of the fit")
        ax.text(0.02, 0.97, _fit_text(fit), transform=ax.transAxes, va="top", fontsize=9,
                bbox=dict(facecolor="white", alpha=0.8, edgecolor="0.8"))
        ax.axhline(0, color="grey", linewidth=1)
        ax.set_xscale("log")
        low_x, high_x = ax.get_xlim()
        if high_x / low_x < 100:  # under two decades: plain numbers, not 4 × 10⁰
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:g}"[0] in "25" else ""))
        ax.set_xlabel("consensus distance Ξ, mean over 2nd half of training (log)")
        ax.set_title(f"data: {scheme}")
    gaps = table["gap"][np.isfinite(table["gap"])]
    low = high = pad = 0.0
    if len(gaps):  # the band widens fast beyond the points: the axis follows the data, the band is clipped
        low, high = min(0.0, gaps.min()), max(0.0, gaps.max())
        pad = 0.15 * (high - low) + 1.0
        axes.flat[0].set_ylim(low - pad, high + 2 * pad)
    for ax in axes.flat:  # below 0 nothing enters the log fit: the band says so without a glyph of its own
        ax.axhspan(min(low - pad, -1.0) * 10, 0, color="0.5", alpha=0.1, linewidth=0, zorder=0)
    for ax in axes.flat[::ncols]:  # the first panel of each row
        ax.set_ylabel("final accuracy gap to all-reduce (pp)")
    handles = [plt.Line2D([], [], color=colours[n], marker="o", linestyle="none", markersize=7, label=f"n = {n}")
               for n in nodes]
    handles += [plt.Line2D([], [], color="0.3", marker=markers[t], linestyle="none", markersize=7,
                           label=t) for t in topologies]
    handles += [Patch(facecolor="0.5", alpha=0.2, label="gap ≤ 0 (hollow markers):\nnot in the log fit")]
    handles += [plt.Line2D([], [], linestyle="none", label=f"unlabelled: {common}")]
    handles += axes.flat[0].get_legend_handles_labels()[0]
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=9)
    fig.suptitle(title or "Final gap to centralized training against consensus distance")
    fig.tight_layout()
    return save_figure(fig, out_stem)


@figure("3. How do the graph and n set the gap to all-reduce?", order=60, needs=needs,
        intervals=("95% confidence band of the fitted mean",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The task with the most decentralized settings; one panel per data partition."""
    if points is None or summary is None or summary.empty or "consensus_distance" not in points:
        return "no runs with a recorded consensus distance"
    # the check a study's cells pass when its DAG is built, here on the runs
    why = needs(Grid(summary))
    if why:
        return why
    return from_table(lag_table(points, summary), out_stem)


def from_table(table: pd.DataFrame, out_stem: Path):
    """(paths, caption) from lag.lag_table's rows (a study's lag.csv), or the reason there is no figure."""
    table = table[np.isfinite(table["gap"]) & np.isfinite(table["consensus"])]
    if table.empty:
        return "no decentralized run with an all-reduce reference at the same task, data and n"
    task = table.groupby("task").size().idxmax()
    table = table[table["task"] == task]
    fits = {s: _fit_or_none(g) for s, g in table.groupby(table["data"].astype(str))}
    if not any(fits.values()):
        return "needs >= 2 settings with distinct consensus distance and a positive gap (one task and data)"
    paths = plot_lag_vs_consensus(table, out_stem, title=f"Final gap to all-reduce against consensus distance ({task})")
    common = table["method"].value_counts().sort_index().idxmax()
    others = [m for m in sorted(table["method"].unique(), key=method_sort_key) if m != common]
    methods = f"{common} (unlabelled)" + (f" and, labelled, {', '.join(others)}" if others else "")
    parts = []
    for scheme, fit in fits.items():
        if fit is None:
            parts.append(f"{scheme}: no fit")
            continue
        ci = (f" [95% CI {fit['ci_low']:.2f}, {fit['ci_high']:.2f}]" if np.isfinite(fit["ci_low"])
              else " (two points: no interval)")
        parts.append(f"{scheme}: b = {fit['slope']:.2f}{ci}, R² = {fit['r2']:.2f} over {fit['n']} settings "
                     f"({fit['n_dropped']} with gap ≤ 0 left out), Spearman ρ = {fit['spearman']:.2f} "
                     f"(p = {fit['spearman_p']:.2g}, {fit['n_ranked']} settings), semi-log slope "
                     f"k = {fit['k_decade']:.2f} [{fit['k_ci_low']:.2f}, {fit['k_ci_high']:.2f}] pp per decade of Ξ "
                     "over all of them")
    caption = (f"Why decentralized training lags on {task}: each point is one decentralized setting (method, "
               "topology, n), its final test accuracy gap to all-reduce SGD at the same n and data (percentage "
               "points) against Ξ, the consensus distance (1/n) Σ‖xᵢ − x̄‖² averaged over the second half of "
               "training (log scale); medians over seeds that did not diverge. Colour: n; marker: topology (the "
               f"same glyph as in the other figures); methods: {methods}, each label framed in the method's "
               "colour. Line and band: least-squares fit of log gap = log a + b·log Ξ with the 95% "
               f"confidence band of the fitted mean; points with gap ≤ 0 (hollow, in the grey band under 0) cannot "
               "enter a log fit. "
               f"Fits — {'; '.join(parts)}. Theory: the consensus distance adds to the error bound of "
               "decentralized SGD (through L²·Ξ) and grows as the spectral gap shrinks (Choco-SGD: n/(ρ⁴δ²T)), "
               "so the gap should rise with Ξ (b > 0; b ≈ 1 if the effect were linear).")
    return paths, caption
