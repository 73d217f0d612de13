"""Test accuracy of each method against epochs, Mbit sent per worker and modelled time, for one
(task, topology, n) setting."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from analysis.figures import as_percent, iid_only, one_cell_per, save_figure, select_setting, usable  # noqa: E402
from analysis.labels import colours, method_sort_key, with_methods  # noqa: E402

METRIC_LABELS = {"test_acc": "test accuracy (%)", "test_ppl": "test perplexity", "test_loss": "test loss",
                 "train_subopt": "training sub-optimality"}
MAX_LINES = 12  # beyond this a legend stops being readable


def plot_accuracy_curves(points: pd.DataFrame, out_stem: Path, *, metric: str = "test_acc",
                         bits: str = "bits_per_worker", title: str | None = None) -> list[Path]:
    """``points``: one row per run × evaluation point of the methods to compare (run_id, status,
    algorithm, compressor, step, epoch, time_s, ``bits``, ``metric``). One line per method, mean
    over finished seeds with a ± 1 std band; each diverged run dashed, × where it stopped."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    data = with_methods(points)
    data["y"] = as_percent(data[metric]) if metric == "test_acc" else data[metric].astype(float)
    data["mbit"] = data[bits] / 1e6
    axes_spec = [("epoch", "epochs"), ("mbit", "Mbit sent per worker"), ("time_s", "modelled time (s)")]
    methods = sorted(data["method"].unique(), key=method_sort_key)
    palette = colours(methods)
    # mean and band over the runs that finished: a diverged seed would drag the mean down at the
    # step it blew up and then vanish from it, so diverged runs are drawn one by one instead
    alive = data[data["status"] != "diverged"]
    mean = alive.groupby(["method", "step"]).agg(
        epoch=("epoch", "mean"), mbit=("mbit", "mean"), time_s=("time_s", "mean"),
        y=("y", "mean"), sd=("y", "std"), seeds=("y", "count")).reset_index()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), sharey=True)
    for ax, (x, xlabel) in zip(axes, axes_spec):
        # log x: the start (0 bits) has no place on the axis and would draw a flat line from the edge
        positive = (lambda d: d[d[x] > 0]) if x == "mbit" else (lambda d: d)
        for method in methods:
            m = positive(mean[(mean["method"] == method) & mean["y"].notna()].sort_values("step"))
            ax.plot(m[x], m["y"], color=palette[method], linewidth=1.6, label=method)
            band = m["seeds"] > 1
            ax.fill_between(m[x][band], (m["y"] - m["sd"])[band], (m["y"] + m["sd"])[band],
                            color=palette[method], alpha=0.18, linewidth=0)
        for _, run in data[data["status"] == "diverged"].groupby("run_id"):
            run = positive(run[np.isfinite(run["y"]) & np.isfinite(run[x])].sort_values("step"))
            if len(run):
                color = palette[run["method"].iloc[0]]
                ax.plot(run[x], run["y"], color=color, linewidth=1.0, linestyle="--", alpha=0.8)
                ax.plot(run[x].iloc[-1], run["y"].iloc[-1], marker="x", markersize=9, markeredgewidth=2.2,
                        color=color, zorder=5)
        ax.set_xlabel(xlabel)
    axes[1].set_xscale("log")  # bits differ by orders of magnitude between compressors
    if metric != "test_acc":
        axes[0].set_yscale("log")
    axes[0].set_ylabel(METRIC_LABELS.get(metric, metric))
    handles = [Line2D([], [], color=palette[m], linewidth=2, label=m) for m in methods]
    if (data["status"] == "diverged").any():
        handles.append(Line2D([], [], color="black", marker="x", linestyle="none", markersize=8,
                              label="diverged run (dashed) stopped"))
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.suptitle(title or f"{METRIC_LABELS.get(metric, metric).capitalize()} per method")
    fig.tight_layout()
    return save_figure(fig, out_stem)


def pick_metric(points: pd.DataFrame) -> str | None:
    """Perplexity for language tasks (the paper's measure there), else accuracy where the task has
    one, else sub-optimality or test loss."""
    for metric in ("test_ppl", "test_acc", "train_subopt", "test_loss"):
        if metric in points and pd.to_numeric(points[metric], errors="coerce").notna().any():
            return metric
    return None


def draw(run_dir: Path, points, summary, out_stem: Path):
    """The setting shown: the (task, topology, n) with the most runs among those with >= 3 methods
    (algorithm + compressor); at its most common network preset, one cell per method."""
    if points is None or points.empty:
        return "no run metrics (metrics.parquet) to draw"
    points = iid_only(usable(points))
    chosen = select_setting(points, min_methods=3)
    if chosen is None:
        return "no (task, topology, n) setting with at least 3 methods"
    (task, topology, nodes), runs = chosen
    network = runs["network"].mode().iloc[0] if runs["network"].notna().any() else None
    if network is not None:
        runs = runs[runs["network"] == network]
    runs = one_cell_per(runs, ["method"])
    notes = ""
    if runs["method"].nunique() > MAX_LINES:
        # a Table 1 grid has ~34 methods: keep the references and the paper's method
        keep = runs["algorithm"].isin(["allreduce", "dpsgd", "choco"])
        notes = " Only all-reduce, D-PSGD and Choco are drawn; Table 1 has the other methods."
        runs = runs[keep]
    sel = points[points["run_id"].isin(set(runs["run_id"]))]
    metric = pick_metric(sel)
    if metric is None:
        return f"no test metric recorded for {task}"
    rho = runs.loc[runs["algorithm"] != "allreduce", "spectral_gap"]
    rho_text = f" (spectral gap ρ = {rho.iloc[0]:.3g})" if len(rho) and pd.notna(rho.iloc[0]) else ""
    what = METRIC_LABELS[metric].replace(" (%)", "")
    if metric in ("test_ppl", "train_subopt", "test_loss"):
        notes = " Lower is better (log scale)." + notes
    title = f"{what.capitalize()} on {task}: {topology}, n = {nodes}" + (f", {network}" if network else "")
    paths = plot_accuracy_curves(sel, out_stem, metric=metric, title=title)
    seeds = runs.groupby("method")["run_id"].nunique()
    seeds = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}–{seeds.max()}"
    caption = (f"{what.capitalize()} of the averaged model on {task} with n = {nodes} workers on a {topology}"
               f"{rho_text}, against training epochs (left), Mbit sent per worker (middle, log scale; the bits "
               f"the suite's own encoding puts on the wire) and modelled time under the {network or 'default'} "
               f"network preset (right). Lines: mean over seeds ({seeds} per method), "
               "bands ± 1 standard deviation over the runs that finished; a diverged run is drawn on its own "
               "(dashed) up to the × where it stopped. All-reduce SGD is the centralized reference. The "
               f"setting is the most-run (task, topology, n) among those with at least three methods.{notes}")
    return paths, caption
