"""What an unreliable network costs (the `faults` study). Top row, one panel per topology: the final
accuracy of the workers' own models against the share of messages lost, a line per method, losses drawn
independently (solid, filled) and in bursts (dashed, hollow), all-reduce on a perfect network as a
dotted reference. Bottom row: the modelled time to the target accuracy against how badly the workers
straggle, with 0 for the same method on a perfect network; an unreached target is marked where its runs
ended, as in the time_to_accuracy figure."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.transforms import ScaledTranslation  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures import requirements as req  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis.figures.time_to_accuracy import BEYOND, bar_table, log_axis, run_ends  # noqa: E402
from analysis.labels import centralized, method_label, method_sort_key, style, with_methods  # noqa: E402
from analysis.selection import REFERENCE, iid_only, one_cell_per, usable  # noqa: E402

NO_FAULTS = ("needs runs on an unreliable network: a faults: setting with drop > 0 (losses at a rate) or an "
             "exponential straggler")
MAX_TOPOLOGIES = 4
DODGE = 3.0  # points between the series drawn at one x, so that their bars do not hide each other
SPREAD = 8.0  # points at most from a value's tick to its farthest series: a point reads at the x it has
BURST_DASHES = ["--", "-.", ":"]  # one per burst length; independent losses are solid
KEYS = ["topology", "method", "drop", "drop_model", "burst", "straggler_mean", "late", "staleness", "active",
        "absences", "pairwise"]
REFERENCE_LABEL = "all-reduce, perfect network"


def needs(grid: req.Grid) -> str | None:
    """A decentralized run that lost messages at a rate, or any run with an exponential straggler."""
    runs = req.iid_runs(grid)
    losses = req.lossy(runs) & (runs["algorithm"] != REFERENCE)
    return None if (losses | req.straggled(runs)).any() else NO_FAULTS


def _on(data: pd.DataFrame, topology) -> pd.DataFrame:
    """The runs of one topology; a method that uses no graph (all-reduce) from any topology when it has no
    run under this one."""
    here = data[data["topology"] == topology]
    graphless = data[[centralized(a) for a in data["algorithm"]]]
    missing = graphless[~graphless["method"].isin(set(here["method"]))]
    return pd.concat([here, missing.assign(topology=topology)], ignore_index=True)


def _topologies(runs: pd.DataFrame) -> list:
    """The topologies of ``runs``, sparsest first (least spectral gap, then name), at most MAX_TOPOLOGIES."""
    gaps = pd.to_numeric(runs["spectral_gap"], errors="coerce").groupby(runs["topology"]).median()
    return sorted(gaps.index, key=lambda t: (np.nan_to_num(gaps[t], nan=np.inf), str(t)))[:MAX_TOPOLOGIES]


def loss_table(data: pd.DataFrame, value: str) -> pd.DataFrame:
    """One row per (topology, method, loss model, burst, drop): the median, min and max of ``value`` over the
    seeds that have it, their count and the runs' count. ``model``: ``independent`` (Bernoulli; the runs
    without losses are its drop 0) or ``bursts`` (Gilbert-Elliott)."""
    data = data.assign(model=np.where(data["drop_model"] == "gilbert-elliott", "bursts", "independent"),
                       burst=data["burst"].where(data["drop_model"] == "gilbert-elliott"))
    out = data.groupby(["topology", "method", "model", "burst", "drop"], dropna=False).agg(
        median=(value, "median"), low=(value, "min"), high=(value, "max"), seeds=(value, "count"),
        runs=("run_id", "nunique"), diverged=("status", lambda s: int((s == "diverged").sum())))
    return out.reset_index()


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


def _legend_handles(methods, bursts, reference: bool, unreached: set) -> tuple[list, list]:
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


def _legends(fig, grid, empty: list, cols: int, looks: list, ways: list) -> None:
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


def plot_faults_effect(losses: dict, stragglers: dict, out_stem: Path, *, reference: float | None, ylabel: str,
                       title: str, logs: dict) -> list[Path]:
    """``losses``: topology -> loss_table; ``stragglers``: topology -> bar_table over straggler means;
    ``logs``: topology -> whether that straggler panel has a log time axis."""
    paper_theme()
    rows = [r for r in (losses, stragglers) if r]
    cols = max(len(r) for r in rows)
    fig = plt.figure(figsize=(5.0 * cols + (2.6 if cols == 1 else 0), 4.1 * len(rows) + 0.6))
    grid = fig.add_gridspec(len(rows), cols)
    first, letters = {}, iter("abcdefgh")  # one letter per panel, row by row
    for i, (row, part) in enumerate(zip(rows, ("losses", "stragglers") if losses else ("stragglers",))):
        for j, (topology, table) in enumerate(row.items()):
            ax = fig.add_subplot(grid[i, j], sharey=first.get(part))
            first.setdefault(part, ax)
            if part == "losses":
                plot_losses(ax, table, reference, ylabel)
                ax.set_title(f"({next(letters)}) {topology}: accuracy against lost messages")
            else:
                plot_stragglers(ax, table, logs[topology])
                ax.set_title(f"({next(letters)}) {topology}: time to target against stragglers")
            if j:  # the row shares its value axis: named once, at its left
                ax.set_ylabel("")
    methods = sorted({m for r in rows for t in r.values() for m in t["method"]}, key=method_sort_key)
    bursts = sorted({b for t in losses.values() for b in t.loc[t["model"] == "bursts", "burst"].dropna()})
    unreached = {"diverged" if why == "diverged" else "censored"
                 for t in stragglers.values() for why in t.loc[~np.isfinite(t["median"]), "why"]}
    fig.suptitle(title)
    empty = [(i, j) for i, row in enumerate(rows) for j in range(len(row), cols)]
    _legends(fig, grid, empty, cols, *_legend_handles(methods, bursts, reference is not None, unreached))
    return save_figure(fig, out_stem)


def _percent(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


@figure("8. What do lost messages and slow workers cost?", order=110, needs=needs,
        intervals=("bars: the least to the greatest seed",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The (task, n) with the most runs on an unreliable network; each topology with losses (top) or
    stragglers (bottom), up to MAX_TOPOLOGIES; one cell per method and fault setting."""
    if summary is None or summary.empty:
        return "no summary of the runs"
    why = needs(req.Grid(summary))  # what a study's cells are checked for when its DAG is built
    if why:
        return why
    data = with_methods(iid_only(usable(req.with_faults(summary))))
    faulty = data[req.lossy(data) | req.straggled(data)]
    task, nodes = faulty.groupby(["task", "nodes"]).size().idxmax()
    data = data[(data["task"] == task) & (data["nodes"] == nodes)]
    faulty = faulty[(faulty["task"] == task) & (faulty["nodes"] == nodes)]
    if "network" in data:  # one network preset: the most run with faults
        data = data[data["network"].fillna("default") == faulty["network"].fillna("default").mode().iloc[0]]
    data = one_cell_per(data, KEYS)
    local = "final_local_acc" in data and data.loc[req.lossy(data), "final_local_acc"].notna().any()
    value = "final_local_acc" if local else "final_test_acc"
    data = data.assign(acc=as_percent(pd.to_numeric(data[value], errors="coerce")).to_numpy())
    decentral = data[[not centralized(a) for a in data["algorithm"]]]
    losses = {}
    for topology in _topologies(decentral[req.lossy(decentral)]):
        here = decentral[decentral["topology"] == topology]
        shown = here[here["method"].isin(set(here.loc[req.lossy(here), "method"]))]
        losses[topology] = loss_table(shown[req.lossy(shown) | req.perfect(shown)], "acc")
    ref = data[(data["algorithm"] == REFERENCE) & req.perfect(data)]
    ref_acc = ref["acc"] if ref["acc"].notna().any() else as_percent(ref["final_test_acc"])
    reference = float(ref_acc.median()) if ref_acc.notna().any() else None
    stragglers, logs, times = {}, {}, {"time_to_target_s", "tta_status"} <= set(data.columns)
    if times and data["tta_status"].isin(["reached", "censored", "diverged"]).any():
        for topology in _topologies(data[req.straggled(data)]):
            here = _on(data, topology)
            here = here[here["method"].isin(set(here.loc[req.straggled(here), "method"]))]
            here = here[req.straggled(here) | req.perfect(here)]
            stragglers[topology] = bar_table(here.assign(network=here["straggler_mean"]), ends=run_ends(points))
            logs[topology] = log_axis(stragglers[topology])
    if not losses and not stragglers:
        return "no decentralized run with losses at a rate, and no target accuracy to time the stragglers against"
    ylabel = ("final accuracy of the workers' own\nmodels (%, mean over workers)" if local
              else "final test accuracy of the\naveraged model (%)")
    title = f"Lost messages and slow workers ({task}, n = {nodes})"
    paths = plot_faults_effect(losses, stragglers, out_stem, reference=reference, ylabel=ylabel, title=title,
                               logs=logs)
    return paths, _caption(data, losses, stragglers, logs, reference, local, task, nodes)


def _caption(data, losses, stragglers, logs, reference, local, task, nodes) -> str:
    tables = list(losses.values()) + list(stragglers.values())
    seeds = [int(s) for t in tables for s in t["seeds"] if s > 0]
    most = max(seeds, default=1)
    count = f"{most}" if min(seeds, default=1) == most else f"{min(seeds)}–{most}"
    seed_text = ("1 seed per point (no spread shown)" if most == 1 else
                 f"median over {count} seeds per point; bars: the least to the greatest seed")
    text = [f"What an unreliable network costs on {task} with n = {nodes} workers; {seed_text}."]
    if losses:
        what = ("the paper's metric: the final test accuracy of each worker's own model, averaged over the n "
                "workers" if local else "the final test accuracy of the averaged model (the runs did not score "
                "every worker's own model)")
        drops = sorted({d for t in losses.values() for d in t["drop"] * 100})
        shares = data[req.lossy(data)].groupby("drop")["dropped_share"].median().dropna()
        measured = (f" (measured shares lost: {', '.join(f'{v * 100:.3g}%' for v in shares)} at "
                    f"{_percent(shares.index * 100)}%)" if len(shares) else "")
        ref = (f" The dotted line is all-reduce on a perfect network ({reference:.4g}%)." if reference is not None
               else " No all-reduce run on a perfect network: no reference line.")
        text.append(f"Top row: {what}, against the share of messages each directed link loses per round, "
                    f"{_percent(drops)}%{measured}, on a symmetric-log axis so that 0% (a perfect network) is "
                    "shown. Solid lines and filled markers: each message lost on its own (Bernoulli); dashed, "
                    "hollow: lost in bursts at the same mean rate (Gilbert-Elliott). The series at one x are "
                    f"shifted sideways by at most {SPREAD:g} points around its tick, so that the bars stay apart."
                    + ref)
        diverged = sum(int(t["diverged"].sum()) for t in losses.values())
        if diverged:
            text.append(f"{diverged} run(s) diverged; each counts with its final accuracy where it has one.")
    if stragglers:
        scale = "a log axis, points only (the times span decades)" if any(logs.values()) else "a linear axis from 0"
        missed = [f"{r['method']} at m = {r['network']:g} ({r['status']})" for t in stragglers.values()
                  for _, r in t[~np.isfinite(t["median"])].iterrows()]
        text.append(("Bottom row: m" if losses else "M") + "odelled time to the target accuracy (the α–β cost "
                    "model: a synchronous round waits for "
                    "its slowest worker) against the straggler mean m: at every step each worker's compute takes "
                    "1 + Exp(m) times as long; 0 is the same method on a perfect network. Median over seeds (bars: the "
                    "least to the greatest seed that reached), "
                    f"counting a seed that missed the target as infinite, on {scale}. Where the median seed "
                    "missed it, ↑ marks where those runs ended (the time is beyond) and × a divergence"
                    + (f": {'; '.join(missed)}." if missed else "; every point reached it."))
    other = data[~(req.lossy(data) | req.straggled(data) | req.perfect(data))]
    if len(other):
        text.append(f"Not drawn: {len(other)} run(s) with outages, symmetric losses, a fixed straggler or "
                    "losses and stragglers together.")
    return " ".join(text)
