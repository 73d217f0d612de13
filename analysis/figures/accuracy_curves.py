"""Test accuracy of each method against epochs, Mbit sent per worker and modelled time, for one
(task, topology, n) setting."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis import labels  # noqa: E402
from analysis.labels import method_sort_key, style, with_methods  # noqa: E402
from analysis.units import bits_counts, bits_label  # noqa: E402
from analysis.selection import REFERENCE, iid_only, one_cell_per, select_setting, usable  # noqa: E402

METRIC_LABELS = {"test_acc": "test accuracy (%)", "test_ppl": "test perplexity", "test_loss": "test loss",
                 "train_subopt": "training sub-optimality"}
MAX_LINES = 12  # beyond this a legend stops being readable
MAX_SEEDS_DRAWN = 5  # up to this many seeds each is drawn; beyond, the median and its interquartile band
MARK_EVERY = 0.12  # a method's marker every ~12% of the axes' diagonal: its look, without hiding the line
COMPARED = 3  # a setting with this many methods is preferred to a more-run one with fewer


def seed_summary(alive: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, step): the median over seeds of x (epoch, mbit, time_s) and y, the
    quartiles of y and how many seeds have a value there."""
    grouped = alive.groupby(["method", "step"])
    out = grouped.agg(epoch=("epoch", "median"), mbit=("mbit", "median"), time_s=("time_s", "median"),
                      y=("y", "median"), seeds=("y", "count")).reset_index()
    quartiles = grouped["y"].quantile([0.25, 0.75]).unstack()
    out["q1"], out["q3"] = quartiles[0.25].to_numpy(), quartiles[0.75].to_numpy()
    return out


def plot_accuracy_curves(points: pd.DataFrame, out_stem: Path, *, metric: str = "test_acc",
                         bits: str = "bits_per_worker", title: str | None = None) -> list[Path]:
    """``points``: one row per run × evaluation point of the methods to compare (run_id, status,
    algorithm, compressor, step, epoch, time_s, ``bits``, ``metric``). Each method in its look
    (labels.style). With up to MAX_SEEDS_DRAWN finished seeds each seed is a thin line and the
    median over seeds a thick one; with more, the median and its interquartile band. Each diverged
    run thin, in its method's look, × where it stopped (a line style always names a method)."""
    paper_theme()
    data = with_methods(points)
    data["y"] = as_percent(data[metric]) if metric == "test_acc" else data[metric].astype(float)
    data["mbit"] = data[bits] / 1e6
    axes_spec = [("epoch", "epochs"), ("mbit", bits_label(bits_counts(data)) + " (log scale)"),
                 ("time_s", "modelled time (s)")]
    methods = sorted(data["method"].unique(), key=method_sort_key)
    looks = {m: style(m) for m in methods}
    # the median over the runs that finished: a diverged seed would drag it down at the step it blew
    # up and then vanish from it, so diverged runs are drawn one by one instead
    alive = data[data["status"] != "diverged"]
    centre = seed_summary(alive)
    seeds = alive.groupby("method")["run_id"].nunique()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), sharey=True)
    for ax, (x, xlabel) in zip(axes, axes_spec):
        # log x: the start (0 bits) has no place on the axis and would draw a flat line from the edge
        positive = (lambda d: d[d[x] > 0]) if x == "mbit" else (lambda d: d)
        for method in methods:
            look = looks[method]
            count = int(seeds.get(method, 0))
            if 1 < count <= MAX_SEEDS_DRAWN:
                for _, run in alive[alive["method"] == method].groupby("run_id"):
                    run = positive(run[run["y"].notna()].sort_values("step"))
                    ax.plot(run[x], run["y"], color=look["color"], linestyle=look["linestyle"], linewidth=0.8,
                            alpha=0.45, gid=f"seed:{method}")
            m = positive(centre[(centre["method"] == method) & centre["y"].notna()].sort_values("step"))
            ax.plot(m[x], m["y"], linewidth=2.0, markersize=5, markevery=MARK_EVERY, label=method,
                    gid=f"median:{method}", **look)
            if count > MAX_SEEDS_DRAWN:
                ax.fill_between(m[x], m["q1"], m["q3"], color=look["color"], alpha=0.18, linewidth=0)
        for _, run in data[data["status"] == "diverged"].groupby("run_id"):
            run = positive(run[np.isfinite(run["y"]) & np.isfinite(run[x])].sort_values("step"))
            if len(run):
                look = looks[run["method"].iloc[0]]
                color = look["color"]  # its method's line style: a line style names a method, × a divergence
                ax.plot(run[x], run["y"], color=color, linewidth=1.0, linestyle=look["linestyle"], alpha=0.8,
                        gid=f"diverged:{run['method'].iloc[0]}")
                ax.plot(run[x].iloc[-1], run["y"].iloc[-1], marker="x", markersize=9, markeredgewidth=2.2,
                        color=color, zorder=5)
        ax.set_xlabel(xlabel)
    axes[1].set_xscale("log")  # bits differ by orders of magnitude between compressors
    if metric != "test_acc":
        axes[0].set_yscale("log")
    axes[0].set_ylabel(METRIC_LABELS.get(metric, metric))
    handles = [Line2D([], [], linewidth=2, markersize=6, label=m, **looks[m]) for m in methods]
    if ((seeds > 1) & (seeds <= MAX_SEEDS_DRAWN)).any():
        handles += [Line2D([], [], color="0.4", linewidth=0.8, alpha=0.6, label="one seed"),
                    Line2D([], [], color="0.4", linewidth=2.0, label="median over seeds")]
    if (seeds > MAX_SEEDS_DRAWN).any():
        handles.append(Patch(color="0.4", alpha=0.25, label="interquartile range over seeds"))
    if (data["status"] == "diverged").any():
        handles.append(Line2D([], [], color="black", marker="x", linestyle="none", markersize=8,
                              label="diverged run, × where it stopped"))
    fig.suptitle(title or f"{METRIC_LABELS.get(metric, metric).capitalize()} per method")
    fig.tight_layout()
    # below the panels, not beside them: the figure stays narrow enough to read at page width
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(handles)),
               frameon=False, fontsize=10)
    return save_figure(fig, out_stem)


def pick_metric(points: pd.DataFrame) -> str | None:
    """Perplexity for language tasks (the paper's measure there), else accuracy where the task has
    one, else sub-optimality or test loss."""
    for metric in ("test_ppl", "test_acc", "train_subopt", "test_loss"):
        if metric in points and pd.to_numeric(points[metric], errors="coerce").notna().any():
            return metric
    return None


@figure("2. How fast does each method learn: epochs, bits, time?", order=10,
        intervals=("bands: interquartile range over seeds",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The setting shown: the (task, topology, n) with the most runs among those with the most methods
    (algorithm + compressor), up to COMPARED (a single method is drawn too); at its most common network
    preset, one cell per method."""
    if points is None or points.empty:
        return "no run metrics (metrics.parquet) to draw"
    points = iid_only(usable(points))
    chosen = next(filter(None, (select_setting(points, min_methods=k) for k in range(COMPARED, 0, -1))), None)
    if chosen is None:
        return "no finished runs"
    (task, topology, nodes), runs = chosen
    network = runs["network"].mode().iloc[0] if runs["network"].notna().any() else None
    if network is not None:
        runs = runs[runs["network"] == network]
    runs = one_cell_per(runs, ["method"])
    notes = ""
    if runs["method"].nunique() > MAX_LINES:
        # a Table 1 grid has ~34 methods: keep the exact references and the headline method (its class says so)
        keep = [labels.exact(a, c) or labels.headline(a) for a, c in zip(runs["algorithm"], runs["compressor"])]
        runs = runs[keep]
        drawn = sorted({labels.algorithm_label(a) for a in runs["algorithm"]})
        notes = f" Only {', '.join(drawn)} are drawn; Table 1 has the other methods."
    sel = points[points["run_id"].isin(set(runs["run_id"]))]
    metric = pick_metric(sel)
    if metric is None:
        return f"no test metric recorded for {task}"
    rho = runs.loc[runs["algorithm"] != REFERENCE, "spectral_gap"]
    rho_text = f" (spectral gap ρ = {rho.iloc[0]:.3g})" if len(rho) and pd.notna(rho.iloc[0]) else ""
    what = METRIC_LABELS[metric].replace(" (%)", "")
    if metric in ("test_ppl", "train_subopt", "test_loss"):
        notes = " Lower is better (log scale)." + notes
    data = runs["data"].dropna().astype(str)
    data = data.mode().iloc[0] if len(data) else None  # iid_only left one partition: say which
    title = (f"{what.capitalize()} on {task}: {topology}, n = {nodes}" + (f", {network}" if network else "")
             + (f", data: {data}" if data else ""))
    paths = plot_accuracy_curves(sel, out_stem, metric=metric, title=title)
    seeds = runs[runs["status"] != "diverged"].groupby("method")["run_id"].nunique()
    if seeds.empty:
        seeds = pd.Series([0])
    count = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}–{seeds.max()}"
    if seeds.max() <= 1:
        spread = "One seed per method."
    elif seeds.max() <= MAX_SEEDS_DRAWN:
        spread = (f"Thin lines: each seed that finished ({count} per method); thick lines with markers: their "
                  "median at each evaluation.")
    else:
        spread = (f"Thick lines: the median over the seeds that finished ({count} per method)"
                  + (f", each seed drawn as a thin line where a method has at most {MAX_SEEDS_DRAWN}"
                     if seeds.min() <= MAX_SEEDS_DRAWN else "")
                  + "; bands: interquartile range over seeds where a method has more.")
    partition = f", data partition {data}" if data else ""
    caption = (f"{what.capitalize()} of the averaged model on {task} with n = {nodes} workers on a {topology}"
               f"{rho_text}{partition}, against training epochs (left), {bits_label(bits_counts(points)).lower()} (middle, log "
               f"scale; the suite's own encoding, a copy on every link a message travels) and modelled time under the {network or 'default'} "
               f"network preset (right). Each method has one colour, marker and line style in every figure. "
               f"{spread} A diverged run is drawn on its own (thin, in its method's look) up to the × where it stopped and left "
               "out of the median. All-reduce SGD is the centralized reference. The "
               f"setting is the most-run (task, topology, n) among those with the most methods (up to "
               f"{COMPARED}).{notes}")
    return paths, caption
