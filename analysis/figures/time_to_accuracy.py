"""Modelled time to reach the target accuracy, per method and network preset (grouped bars from 0, or
dots on a log axis where the times span decades; unreached targets shown, not dropped)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures.base import figure, paper_theme, plain_log_ticks  # noqa: E402
from analysis.labels import method_sort_key, style, with_methods  # noqa: E402
from analysis.selection import iid_only, one_cell_per, select_setting, usable  # noqa: E402
from analysis.files import read_regular

AXIS_LABELS = {"time_to_target_s": "modelled time to target (s)", "epochs_to_target": "epochs to target",
               "bits_to_target": "bits a worker put on its links to target"}


# each value's column in the evaluation points: where a run stood when it ended (its censoring point)
END_COLUMNS = {"time_to_target_s": "time_s", "epochs_to_target": "epoch", "bits_to_target": "bits_per_worker"}
GAP = 1.0  # between the groups of two network presets, in bar widths
BAR = 0.9  # the width of a bar
DECADES = 1.5  # values spanning more decades than this are dots on a log axis, not bars from 0
LIFT = 9  # points between a mark and its label
BEYOND = r"$\uparrow$"  # the mark of a censored target on the dot plot, where ▲ is a compressor's marker
UNITS = {"time_to_target_s": " s", "epochs_to_target": " epochs", "bits_to_target": " bits"}


def run_ends(points: pd.DataFrame | None, value: str = "time_to_target_s") -> pd.Series:
    """run_id -> the last recorded ``value`` axis of each run (time, epochs or bits when it ended)."""
    column = END_COLUMNS.get(value)
    if points is None or column is None or column not in points:
        return pd.Series(dtype=float)
    return pd.to_numeric(points[column], errors="coerce").groupby(points["run_id"]).max()


def bar_table(summary: pd.DataFrame, value: str = "time_to_target_s", ends: pd.Series | None = None) -> pd.DataFrame:
    """One row per (network, method): median over seeds (unreached seeds count as +inf, so the
    median is finite only when most seeds reached), min/max of reached seeds, and status counts.
    ``end``: where the median unreached seed stood when its run ended (from ``ends``, run_id ->
    last value; NaN without it): the target was not reached by then; ``why``: diverged or censored."""
    data = with_methods(usable(summary))
    ends = ends if ends is not None else pd.Series(dtype=float)
    rows = []
    for (network, method), g in data.groupby([data["network"].fillna("default"), "method"]):
        v = pd.to_numeric(g[value], errors="coerce").fillna(math.inf).to_numpy(float).copy()
        reached = g["tta_status"].eq("reached").to_numpy()
        v[~reached] = math.inf
        unreached = g.loc[~reached, "tta_status"].value_counts()
        stopped = g.loc[~reached, "run_id"].map(ends).dropna() if len(ends) else pd.Series(dtype=float)
        rows.append({"network": network, "method": method, "median": float(np.median(v)),
                     "low": v[reached].min() if reached.any() else math.nan,
                     "high": v[reached].max() if reached.any() else math.nan,
                     "reached": int(reached.sum()), "seeds": len(g),
                     "status": ", ".join(f"{n} {s}" for s, n in unreached.items()) or "reached",
                     "why": unreached.idxmax() if len(unreached) else "",
                     "end": float(stopped.median()) if len(stopped) else math.nan})
    return pd.DataFrame(rows)


def _amount(v: float, value: str) -> str:
    return f"{v:.3g}{UNITS.get(value, '')}"


def network_bandwidths(summary: pd.DataFrame) -> dict[str, float]:
    """Each network preset's bandwidth (bit/s) as its runs' run.json states it (``network.bandwidth_bps``),
    read from one run of each; a preset whose runs say nothing is left out."""
    out: dict[str, float] = {}
    if "path" not in summary:
        return out
    for network, g in summary.groupby("network"):
        for path in g["path"].dropna().astype(str):
            try:
                record = json.loads(read_regular(Path(path) / "run.json"))
                out[network] = float(record["network"]["bandwidth_bps"])
                break
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return out


def network_order(summary: pd.DataFrame) -> list[str]:
    """The presets from the fastest link to the slowest (by bandwidth, then name); names alone when the
    runs do not state their bandwidth."""
    speed = network_bandwidths(summary)
    return sorted(summary["network"].unique(), key=lambda n: (-speed.get(n, -1.0), str(n)))


def log_axis(table: pd.DataFrame) -> bool:
    """Whether the values a figure of ``table`` (bar_table) draws (medians, the seeds' range, where
    unreached runs ended) span more than DECADES: then they are dots on a log axis (a bar there would
    start at an arbitrary floor, its length meaning nothing), else bars on a linear axis from 0."""
    drawn = table[["median", "low", "high", "end"]].to_numpy(float)
    drawn = drawn[np.isfinite(drawn) & (drawn > 0)]
    return bool(drawn.size) and math.log10(drawn.max() / drawn.min()) > DECADES


def _reached(ax, x: float, r, look: dict, log: bool, gid: str) -> None:
    """A median that reached: a bar from 0 with black whiskers, or on a log axis a dot in the method's
    marker on a line spanning the seeds that reached."""
    color = look["color"]
    if log:
        if r["reached"] > 1:
            ax.plot([x, x], [r["low"], r["high"]], color=color, linewidth=2.2, solid_capstyle="round",
                    gid=f"seeds:{gid}")
        ax.plot(x, r["median"], marker=look["marker"], markersize=9, color=color, markeredgecolor="white",
                linestyle="none", zorder=4, gid=f"reached:{gid}")
    else:
        ax.bar(x, r["median"], BAR, color=color, gid=f"reached:{gid}")
        if r["reached"] > 1:
            ax.plot([x, x], [r["low"], r["high"]], color="black", linewidth=1.2, gid="seeds")  # black: no method's


def _unreached(ax, x: float, r, color, log: bool, gid: str, value: str) -> tuple:
    """A median that did not reach: on the linear axis a hatched outline up to where its runs ended
    (censored: a lower bound on the time); its mark and label are placed once the axis is known.
    Returns (x, end or None, mark, colour, text, gid)."""
    diverged = r["why"] == "diverged"
    end = r["end"] if np.isfinite(r["end"]) and r["end"] > 0 else None
    if end is not None and not diverged and not log:
        ax.bar(x, end, BAR, facecolor="white", edgecolor=color, hatch="//", linewidth=1.5, gid=f"unreached:{gid}")
    text = r["status"] + ("" if end is None else f" by {_amount(end, value)}" if diverged
                          else f": > {_amount(end, value)}")
    return x, end, "x" if diverged else BEYOND if log else "^", color, text, gid


def _room(text: str, axes_height: float) -> float:
    """The share of the axes' height a label reading upward from its mark takes (8 pt text)."""
    return min(0.6, (0.15 + (LIFT + len(text) * 8 * 0.55) / 72) / axes_height)


def _limits(table: pd.DataFrame, texts: list, log: bool, axes_height: float) -> tuple[float, float]:
    """The value axis: from 0 (bars) or a little below the least value (dots on a log axis) to above
    the greatest, grown so that every label (y, text) reading upward from its mark fits."""
    drawn = table[["median", "high", "end"]].to_numpy(float)
    drawn = drawn[np.isfinite(drawn) & (drawn > 0)]
    if log:
        floor, top = (drawn.min() / 2, drawn.max() * 2) if drawn.size else (0.1, 1.0)
    else:
        floor, top = 0.0, (drawn.max() * 1.12 if drawn.size else 1.0)
    scale, back = (math.log, math.exp) if log else (float, float)
    at = [(y, _room(text, axes_height)) for y, text in texts if y is not None]
    top = back(max([scale(top)] + [scale(floor) + (scale(y) - scale(floor)) / (1 - f) for y, f in at]))
    return floor, top


def _mark(ax, x: float, end, mark: str, color, text: str, gid: str) -> None:
    """▲ or ↑ (censored) or × (diverged) where the runs ended, labelled upward; without an end (no points
    given) at the top of the axes, labelled downward."""
    where = dict(xycoords=ax.get_xaxis_transform()) if end is None else {}
    y = 0.96 if end is None else end
    size, edge = (15, 0.6) if mark == BEYOND else (9, 2.2)
    ax.plot(x, y, marker=mark, color=color, markersize=size, markeredgewidth=edge, linestyle="none", zorder=5,
            gid=f"unreached-mark:{gid}", transform=ax.get_xaxis_transform() if end is None else ax.transData)
    ax.annotate(text, (x, y), xytext=(0, LIFT if end is not None else -LIFT), textcoords="offset points",
                ha="center", va="bottom" if end is not None else "top", rotation=90, fontsize=8, **where)


def _legend(ax, table: pd.DataFrame, methods: list[str], looks: dict, log: bool) -> None:
    """Each method's colour (its marker too on the dot plot), then the marks of unreached targets."""
    if log:
        handles = [Line2D([], [], color=looks[m]["color"], marker=looks[m]["marker"], markersize=8,
                          markeredgecolor="white", linestyle="none", label=m) for m in methods]
    else:
        handles = [Patch(color=looks[m]["color"], label=m) for m in methods]
    missed = table[~np.isfinite(table["median"])]
    if (missed["why"] != "diverged").any():
        what = f"not reached when the run ended\n(censored: the time is beyond {'↑' if log else '▲'})"
        handles.append(Line2D([], [], color="black", marker=BEYOND, linestyle="none", markersize=13, label=what)
                       if log else Patch(facecolor="white", edgecolor="black", hatch="//", label=what))
    if (missed["why"] == "diverged").any():
        handles.append(Line2D([], [], color="black", marker="x", linestyle="none", markersize=8,
                              markeredgewidth=2, label="not reached: diverged (when)"))
    ax.legend(handles=handles, fontsize=9, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)


def plot_time_to_accuracy(summary: pd.DataFrame, out_stem: Path, *, value: str = "time_to_target_s",
                          title: str | None = None, points: pd.DataFrame | None = None) -> list[Path]:
    """``summary``: one row per run (run_id, algorithm, compressor, network, status, tta_status,
    ``value``); ``points``: their evaluation points, for where each unreached run ended. Each method in
    its colour: the median over seeds as a bar from 0 with whiskers min–max of the seeds that
    reached, or, when the values span more than DECADES (log_axis), as a dot in its marker on a line
    spanning those seeds, on a log axis. A method whose median seed did not reach has no median: ▲
    on the bars, ↑ on the dots (censored: the run ended first; the bars also have a hatched outline up
    to the ▲, the target not reached by then), or × (diverged) where its runs ended, labelled "not
    reached". Without ``points`` (no end known) only the mark, at the top of the axes."""
    paper_theme()
    table = bar_table(summary, value, run_ends(points, value))
    log = log_axis(table)
    order = network_order(summary)
    networks = sorted(table["network"].unique(), key=lambda n: order.index(n) if n in order else len(order))
    methods = sorted(table["method"].unique(), key=method_sort_key)
    looks = {m: style(m) for m in methods}
    # one unit per method, a gap of GAP between presets: a preset with few methods takes little room
    sizes = table.groupby("network").size()
    starts = dict(zip(networks, np.cumsum([0] + [sizes[n] + GAP for n in networks[:-1]])))
    units = sizes.sum() + GAP * (len(networks) - 1)
    fig, ax = plt.subplots(figsize=(max(6.5, 4.0 + 0.5 * units), 4.6))
    marks, texts = [], []  # unreached targets (_unreached); (y, text) of every label above a mark
    for network in networks:
        # each preset's group holds only the methods run there, so a preset with few is not full of gaps
        group = table[table["network"] == network]
        group = group.iloc[sorted(range(len(group)), key=lambda k: method_sort_key(group["method"].iloc[k]))]
        for j, (_, r) in enumerate(group.iterrows()):
            x, gid = starts[network] + j, f"{network}:{r['method']}"
            if not np.isfinite(r["median"]):
                marks.append(_unreached(ax, x, r, looks[r["method"]]["color"], log, gid, value))
                texts.append((marks[-1][1], marks[-1][4]))
                continue
            _reached(ax, x, r, looks[r["method"]], log, gid)
            if r["reached"] < r["seeds"]:
                y = r["high"] if np.isfinite(r["high"]) else r["median"]
                texts.append((y, f"{r['reached']}/{r['seeds']}"))
                ax.annotate(texts[-1][1], (x, y), xytext=(0, LIFT), textcoords="offset points", ha="center",
                            va="bottom", rotation=90, fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.set_ylim(*_limits(table, texts, log, fig.get_size_inches()[1] - 1.3))
    if log:
        plain_log_ticks(ax.yaxis)
    for mark in marks:
        _mark(ax, *mark)
    ax.set_xticks([starts[n] + (sizes[n] - 1) / 2 for n in networks])
    ax.set_xlim(-0.5 - GAP / 2, units - 0.5 + GAP / 2)
    ax.set_xticklabels(networks)
    ax.set_xlabel("network preset (α–β model), fastest link first")
    ax.set_ylabel(AXIS_LABELS.get(value, value) + (", log scale" if log else ""))
    _legend(ax, table, methods, looks, log)
    ax.set_title(title or "Time to target accuracy per method and network")
    fig.tight_layout()
    return save_figure(fig, out_stem)


@figure("2. How fast does each method learn: epochs, bits, time?", order=40,
        intervals=("fastest and slowest seed that reached",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The most-run (task, topology, n) setting, every network preset, one cell per method and preset."""
    needed = {"time_to_target_s", "tta_status", "network"}
    if summary is None or summary.empty or not needed <= set(summary.columns):
        return f"no summary with {', '.join(sorted(needed))}"
    if not summary["tta_status"].isin(["reached", "diverged", "censored"]).any():
        return "no target accuracy set (summarize with --target-acc or --target-rel)"
    chosen = select_setting(iid_only(usable(summary)))
    if chosen is None:
        return "no finished runs"
    (task, topology, nodes), runs = chosen
    runs = one_cell_per(runs.assign(network=runs["network"].fillna("default")), ["network", "method"])
    target = pd.to_numeric(runs.get("target"), errors="coerce").dropna()
    metric = runs["metric"].iloc[0] if "metric" in runs else "test_acc"
    if not len(target):
        target_text = "the target"
    elif metric == "test_acc":
        target_text = f"{as_percent(target).iloc[0]:.4g}% test accuracy"
    else:
        target_text = f"{metric} {target.iloc[0]:.4g}"
    title = f"Modelled time to {target_text} ({task}, {topology}, n = {nodes})"
    paths = plot_time_to_accuracy(runs, out_stem, title=title, points=points)
    if log_axis(bar_table(runs, ends=run_ends(points))):
        shown = (f"The times span more than {DECADES:g} decades, so they are dots on a log axis (a bar there would "
                 "start at an arbitrary floor): the median over seeds, counting a seed that missed the target as "
                 "infinite, in each method's marker, on a line joining the fastest and slowest seed that reached")
        censored = ("↑ at the modelled time at which those runs ended (median over them): the time to target is "
                    "more than that")
    else:
        shown = ("Bars from 0 (linear axis): median over seeds, counting a seed that missed the target as infinite; "
                 "whiskers: fastest and slowest seed that reached")
        censored = ("a hatched outline up to the modelled time at which those runs ended (median over them), topped "
                    "by ▲: the time to target is more than that")
    caption = (f"Time to reach {target_text} on {task} with n = {nodes} workers on a {topology}, under each "
               "network preset of the α–β cost model (latency α, bandwidth B; a round costs compute plus the "
               f"slowest worker's communication). {shown}; k/m: seeds that reached. Where the median seed never "
               "reached the target there is no median; the mark is labelled \"not reached\" with how many seeds "
               "were censored or diverged (loss NaN or above 10³). Censored (the run ended first): "
               f"{censored}. Diverged: × at the time they diverged. Compression pays off where bandwidth is "
               "scarce, so Choco's advantage should grow on the slower presets.")
    return paths, caption
