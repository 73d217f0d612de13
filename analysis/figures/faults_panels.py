"""The panels of the faults_effect figure: accuracy against lost messages (plot_losses) and time to target against
stragglers (plot_stragglers), each series dodged sideways around its tick, and the two legends (the methods; how
each thing is drawn). faults_effect.py chooses the runs and the panels and writes the caption."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.transforms import ScaledTranslation

from analysis.figures.time_to_accuracy import BEYOND
from analysis.labels import method_label, method_sort_key, style
from analysis.selection import REFERENCE

DODGE = 3.0  # points between the series drawn at one x, so that their bars do not hide each other
SPREAD = 8.0  # points at most from a value's tick to its farthest series: a point reads at the x it has
BURST_DASHES = ["--", "-.", ":"]  # one per burst length; independent losses are solid
REFERENCE_LABEL = "all-reduce, perfect network"


def _dodged(ax, artist, offset: float) -> None:
    artist.set_transform(ax.transData + ScaledTranslation(offset / 72, 0, ax.figure.dpi_scale_trans))


def _series(ax, x, y, low, high, look: dict, *, linestyle: str, filled: bool, offset: float, gid: str) -> None:
    """A line through medians with min–max bars where >= 2 seeds give them, shifted sideways by ``offset``
    points (the data keep their x)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    bars = np.vstack([y - np.asarray(low, float), np.asarray(high, float) - y])
    line, = ax.plot(x, y, color=look["color"], linestyle=linestyle, linewidth=1.6, marker=look["marker"],
                    markersize=7, markeredgewidth=1.5, markeredgecolor=look["color"],
                    markerfacecolor=look["color"] if filled else "white", zorder=3, gid=gid)
    _dodged(ax, line, offset)
    if np.nan_to_num(bars).any():
        drawn = ax.errorbar(x, y, yerr=np.nan_to_num(bars), fmt="none", ecolor=look["color"], elinewidth=1.1,
                            capsize=3, zorder=2)
        for artist in (*drawn.lines[1], *drawn.lines[2]):
            _dodged(ax, artist, offset)


def _x_axis(ax, values, label: str) -> None:
    """Symmetric-log x: 0 shown, linear up to the least nonzero value, logarithmic above; ticks at the values."""
    values = sorted(set(float(v) for v in values) | {0.0})
    nonzero = [v for v in values if v > 0] or [1.0]
    ax.set_xscale("symlog", linthresh=nonzero[0], linscale=0.8)
    ax.set_xlim(-0.45 * nonzero[0], nonzero[-1] * (1.7 if len(nonzero) > 1 else 1.45))
    ax.set_xticks(values)
    ax.set_xticklabels([f"{v:g}" for v in values])
    ax.minorticks_off()
    ax.set_xlabel(label)


def _offsets(count: int) -> list[float]:
    step = min(DODGE, 2 * SPREAD / max(count - 1, 1))
    return [(i - (count - 1) / 2) * step for i in range(count)]


def plot_losses(ax, table: pd.DataFrame, reference: float | None, ylabel: str) -> None:
    """Panel (a) of one topology (a loss_table of it): x in % of the messages lost."""
    series = sorted(table.groupby(["method", "model", "burst"], dropna=False).groups,
                    key=lambda k: (method_sort_key(k[0]), k[1] != "independent", k[2]))
    bursts = sorted(table.loc[table["model"] == "bursts", "burst"].dropna().unique())
    for (method, model, burst), offset in zip(series, _offsets(len(series))):
        g = table[(table["method"] == method) & (table["model"] == model)
                  & ((table["burst"] == burst) | (pd.isna(burst) & table["burst"].isna()))]
        g = g[g["median"].notna()].sort_values("drop")
        dashes = "-" if model == "independent" else BURST_DASHES[bursts.index(burst) % len(BURST_DASHES)]
        _series(ax, g["drop"] * 100, g["median"], g["low"], g["high"], style(method), linestyle=dashes,
                filled=model == "independent", offset=offset, gid=f"loss:{method}:{model}")
    if reference is not None:
        ax.axhline(reference, color=style(method_label(REFERENCE, "none"))["color"], linestyle=":",
                   linewidth=1.6, zorder=1, gid="reference")
    _x_axis(ax, table["drop"] * 100, "messages lost per link and round (%)")
    ax.set_ylabel(ylabel)


def plot_stragglers(ax, table: pd.DataFrame, log: bool) -> None:
    """Panel (b) of one topology (a time_to_accuracy.bar_table whose ``network`` is the straggler mean)."""
    methods = sorted(table["method"].unique(), key=method_sort_key)
    drawn = table[["median", "high", "end"]].to_numpy(float).ravel()
    top = drawn[np.isfinite(drawn)].max() if np.isfinite(drawn).any() else 1.0
    for method, offset in zip(methods, _offsets(len(methods))):
        g = table[table["method"] == method].sort_values("network")
        look = style(method)
        hit = g[np.isfinite(g["median"])]
        _series(ax, hit["network"], hit["median"], hit["low"].fillna(hit["median"]),
                hit["high"].fillna(hit["median"]), look, linestyle="-", filled=True, offset=offset,
                gid=f"straggler:{method}")
        for _, r in g[~np.isfinite(g["median"])].iterrows():
            end = r["end"] if np.isfinite(r["end"]) and r["end"] > 0 else top * 1.08
            diverged = r["why"] == "diverged"
            mark, = ax.plot([r["network"]], [end], marker="x" if diverged else BEYOND, color=look["color"],
                            markersize=9 if diverged else 15, markeredgewidth=2.2 if diverged else 0.6,
                            linestyle="none", zorder=4, gid=f"unreached:{method}")
            _dodged(ax, mark, offset)
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, top * 1.2)
    _x_axis(ax, table["network"], "straggler mean m: each step each worker computes\n(1 + Exp(m)) × as long (0: none)")
    ax.set_ylabel("modelled time to target (s)" + (", log scale" if log else ""))


def legend_handles(methods, bursts, reference: bool, unreached: set) -> tuple[list, list]:
    """(one handle per method, in its colour and marker; one per way of drawing: losses, reference, marks)."""
    looks = [Line2D([], [], color=style(m)["color"], marker=style(m)["marker"], markersize=7, linewidth=1.6,
                    label=m) for m in methods]
    ways = [Line2D([], [], color="0.3", marker="o", markersize=6, label="messages lost independently (Bernoulli)")
            ] if bursts or reference else []
    for k, burst in enumerate(bursts):
        ways.append(Line2D([], [], color="0.3", marker="o", markerfacecolor="white", markersize=6,
                           linestyle=BURST_DASHES[k % len(BURST_DASHES)],
                           label=f"lost in bursts of {burst:g} rounds (Gilbert-Elliott)"))
    if reference:
        ways.append(Line2D([], [], color=style(method_label(REFERENCE, "none"))["color"], linestyle=":",
                           linewidth=1.6, label=REFERENCE_LABEL))
    if "censored" in unreached:
        ways.append(Line2D([], [], color="0.3", marker=BEYOND, markersize=13, linestyle="none",
                           label="target not reached when the runs ended"))
    if "diverged" in unreached:
        ways.append(Line2D([], [], color="0.3", marker="x", markersize=8, markeredgewidth=2, linestyle="none",
                           label="target not reached: diverged"))
    return looks, ways


def add_legends(fig, grid, empty: list, cols: int, looks: list, ways: list) -> None:
    """The methods' legend and the one of how things are drawn: in a free slot of the grid, else beside a
    single column of panels, else below the panels."""
    fig.tight_layout()
    kw = dict(frameon=False, fontsize=10, title_fontsize=10, alignment="left")
    if empty:
        spot = fig.add_subplot(grid[empty[0]])
        spot.axis("off")
        first = spot.legend(handles=looks, title="method", loc="lower left", bbox_to_anchor=(0.02, 0.5), **kw)
        if ways:
            spot.add_artist(first)
            spot.legend(handles=ways, title="drawn as", loc="upper left", bbox_to_anchor=(0.02, 0.45), **kw)
    elif cols == 1:
        top, bottom = fig.axes[0], fig.axes[-1]
        first = top.legend(handles=looks, title="method", loc="upper left", bbox_to_anchor=(1.02, 1.0), **kw)
        if ways:
            top.add_artist(first)
            bottom.legend(handles=ways, title="drawn as", loc="lower left", bbox_to_anchor=(1.02, 0.0), **kw)
    else:
        fig.legend(handles=looks, title="method", loc="upper right", bbox_to_anchor=(0.48, 0.0), **kw)
        if ways:
            fig.legend(handles=ways, title="drawn as", loc="upper left", bbox_to_anchor=(0.52, 0.0), **kw)
