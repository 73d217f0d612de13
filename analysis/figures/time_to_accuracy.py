"""Modelled time to reach the target accuracy, per method and network preset (grouped bars,
unreached targets shown, not dropped)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis.figures import as_percent, iid_only, one_cell_per, save_figure, select_setting, usable  # noqa: E402
from analysis.labels import method_sort_key, style, with_methods  # noqa: E402

AXIS_LABELS = {"time_to_target_s": "modelled time to target (s)", "epochs_to_target": "epochs to target",
               "bits_to_target": "bits a worker put on its links to target"}


# each value's column in the evaluation points: where a run stood when it ended (its censoring point)
END_COLUMNS = {"time_to_target_s": "time_s", "epochs_to_target": "epoch", "bits_to_target": "bits_per_worker"}
GAP = 1.0  # between the bar groups of two network presets, in bar widths
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
                record = json.loads((Path(path) / "run.json").read_text())
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


def plot_time_to_accuracy(summary: pd.DataFrame, out_stem: Path, *, value: str = "time_to_target_s",
                          title: str | None = None, points: pd.DataFrame | None = None) -> list[Path]:
    """``summary``: one row per run (run_id, algorithm, compressor, network, status, tta_status,
    ``value``); ``points``: their evaluation points, for where each unreached run ended. Bars: median
    over seeds, in the method's colour, whiskers min–max of the seeds that reached. A method whose
    median seed did not reach has no such bar: a hatched outline up to where its runs ended (the
    target was not reached by then), topped by ▲ (censored: the run ended first) or × (diverged),
    and labelled "not reached". Without ``points`` (no end known) only the mark, at the axis top."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    table = bar_table(summary, value, run_ends(points, value))
    order = network_order(summary)
    networks = sorted(table["network"].unique(), key=lambda n: order.index(n) if n in order else len(order))
    methods = sorted(table["method"].unique(), key=method_sort_key)
    looks = {m: style(m) for m in methods}
    drawn = table[["median", "high", "end"]].to_numpy(float)
    drawn = drawn[np.isfinite(drawn) & (drawn > 0)]
    floor, ceiling = (drawn.min() / 3, drawn.max() * 3) if drawn.size else (0.1, 1.0)
    top = ceiling * 1.6
    # one unit per bar, a gap of GAP between presets: a preset with few methods takes little room
    sizes = table.groupby("network").size()
    starts = dict(zip(networks, np.cumsum([0] + [sizes[n] + GAP for n in networks[:-1]])))
    units = sizes.sum() + GAP * (len(networks) - 1)
    fig, ax = plt.subplots(figsize=(max(6.5, 4.0 + 0.5 * units), 4.6))
    labels = []  # (x, end or None, mark, colour, text, id) of each unreached target
    for i, network in enumerate(networks):
        # each preset's group holds only the methods run there, so a preset with few is not full of gaps
        group = table[table["network"] == network]
        group = group.iloc[sorted(range(len(group)), key=lambda k: method_sort_key(group["method"].iloc[k]))]
        width = 0.9
        for j, (_, r) in enumerate(group.iterrows()):
            color = looks[r["method"]]["color"]
            x = starts[network] + j
            if np.isfinite(r["median"]):
                ax.bar(x, r["median"], width, color=color, gid=f"reached:{network}:{r['method']}")
                if r["reached"] > 1:
                    ax.plot([x, x], [r["low"], r["high"]], color="black", linewidth=1.2)
                if r["reached"] < r["seeds"]:
                    y = r["high"] if np.isfinite(r["high"]) else r["median"]
                    ax.text(x, y * 1.15, f"{r['reached']}/{r['seeds']}", ha="center", va="bottom", rotation=90,
                            fontsize=8)
                continue
            # not reached: no time to show, only how far the runs went without reaching it
            diverged = r["why"] == "diverged"
            end = r["end"] if np.isfinite(r["end"]) and r["end"] > 0 else None
            if end is not None and not diverged:  # a lower bound: the target lies beyond the bar's top
                ax.bar(x, end, width, facecolor="white", edgecolor=color, hatch="//", linewidth=1.5,
                       gid=f"unreached:{network}:{r['method']}")
            text = r["status"] + ("" if end is None else f" by {_amount(end, value)}" if diverged
                                  else f": > {_amount(end, value)}")
            labels.append((x, end, "x" if diverged else "^", color, text, f"{network}:{r['method']}"))
    # each label reads upward from its mark, and the axis grows to hold it; without an end (no points
    # given) the mark sits at the top and its label reads downward
    axes_height = fig.get_size_inches()[1] - 1.3
    need = [(y, min(0.6, (0.25 + len(text) * 8 * 0.55 / 72) / axes_height)) for _, y, *_, text, _ in labels
            if y is not None]
    top = math.exp(max([math.log(top)] + [(math.log(y * 1.35) - f * math.log(floor)) / (1 - f) for y, f in need]))
    for x, y, mark, color, text, gid in labels:
        at = y if y is not None else top / 1.3
        ax.plot(x, at, marker=mark, color=color, markersize=9, markeredgewidth=2.2, linestyle="none", zorder=5,
                gid=f"unreached-mark:{gid}")
        ax.text(x, at * 1.35 if y is not None else at / 1.4, text, ha="center", rotation=90, fontsize=8,
                va="bottom" if y is not None else "top")
    ax.set_yscale("log")
    ax.set_ylim(floor, top)
    ax.set_xticks([starts[n] + (sizes[n] - 1) / 2 for n in networks])
    ax.set_xlim(-0.5 - GAP / 2, units - 0.5 + GAP / 2)
    ax.set_xticklabels(networks)
    ax.set_xlabel("network preset (α–β model), fastest link first")
    ax.set_ylabel(AXIS_LABELS.get(value, value) + ", log scale")
    handles = [Patch(color=looks[m]["color"], label=m) for m in methods]
    if not np.isfinite(table["median"]).all():
        missed = table[~np.isfinite(table["median"])]
        if (missed["why"] != "diverged").any():
            handles.append(Patch(facecolor="white", edgecolor="black", hatch="//",
                                 label="not reached when the run ended\n(censored: the time is beyond ▲)"))
        if (missed["why"] == "diverged").any():
            handles.append(Line2D([], [], color="black", marker="x", linestyle="none", markersize=8,
                                  markeredgewidth=2, label="not reached: diverged (when)"))
    ax.legend(handles=handles, fontsize=9, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.set_title(title or "Time to target accuracy per method and network")
    fig.tight_layout()
    return save_figure(fig, out_stem)


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
    caption = (f"Time to reach {target_text} on {task} with n = {nodes} workers on a {topology}, under each "
               "network preset of the α–β cost model (latency α, bandwidth B; a round costs compute plus the "
               "slowest worker's communication). Bars: median over seeds, counting a seed that missed the "
               "target as infinite; whiskers: fastest and slowest seed that reached; k/m: seeds that reached. "
               "Where the median seed never reached the target there is no such bar; the mark is labelled \"not "
               "reached\" with how many seeds were censored or diverged (loss NaN or above 10³). Censored (the run "
               "ended first): a hatched outline up to the modelled time at which those runs ended (median over "
               "them), topped by ▲: the time to target is more than that. Diverged: × at the time they diverged, "
               "no bar. Log scale. "
               "Compression pays off "
               "where bandwidth is scarce, so Choco's advantage should grow on the slower presets.")
    return paths, caption
