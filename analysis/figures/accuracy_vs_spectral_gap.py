"""Final test accuracy and final consensus distance against the spectral gap ρ of the topology,
at a fixed number of workers."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator  # noqa: E402

from analysis.figures import as_percent, iid_only, one_cell_per, save_figure, usable  # noqa: E402
from analysis.figures import requirements  # noqa: E402
from analysis.labels import method_label, method_sort_key, style, with_methods  # noqa: E402


MIN_SPAN = 10.0  # percentage points: the least height of the accuracy axis


def spectral_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, topology): ρ, mean/std final accuracy (%) and mean final consensus
    distance over seeds that did not diverge, and the diverged count."""
    data = with_methods(usable(summary))
    data["acc"] = as_percent(data["final_test_acc"])
    rows = []
    for (method, topology), g in data[data["algorithm"] != "allreduce"].groupby(["method", "topology"]):
        alive = g[g["status"] != "diverged"]
        rows.append({"method": method, "topology": topology, "spectral_gap": g["spectral_gap"].mean(),
                     "acc": alive["acc"].mean(), "acc_std": alive["acc"].std() if len(alive) > 1 else 0.0,
                     "consensus": alive["final_consensus_distance"].mean(), "seeds": len(g),
                     "diverged": int((g["status"] == "diverged").sum())})
    return pd.DataFrame(rows)


def plot_accuracy_vs_spectral_gap(summary: pd.DataFrame, out_stem: Path, *, title: str | None = None) -> list[Path]:
    """``summary``: one row per run at one n (algorithm, compressor, topology, status, spectral_gap,
    final_test_acc, final_consensus_distance); all-reduce runs, if any, give a reference line. Each
    method in its look (labels.style); the x ticks name each topology at its ρ."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    table = spectral_table(summary)
    methods = sorted(table["method"].unique(), key=method_sort_key)
    looks = {m: style(m) for m in methods}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    for method in methods:
        g = table[table["method"] == method].sort_values("spectral_gap")
        look = looks[method]
        bars = axes[0].errorbar(g["spectral_gap"], g["acc"], yerr=g["acc_std"], capsize=3, linewidth=1.4,
                                markersize=6, label=method, **look)
        bars.lines[0].set_gid(f"accuracy:{method}")
        axes[1].plot(g["spectral_gap"], g["consensus"], linewidth=1.4, markersize=6, label=method,
                     gid=f"consensus:{method}", **look)
        for _, r in g[g["diverged"] > 0].iterrows():
            for ax, y in ((axes[0], r["acc"]), (axes[1], r["consensus"])):
                if pd.notna(y):
                    ax.annotate(f"{r['diverged']}/{r['seeds']} diverged", (r["spectral_gap"], y),
                                textcoords="offset points", xytext=(4, 4), fontsize=8, color=look["color"])
    ref = usable(summary)
    ref = ref[(ref["algorithm"] == "allreduce") & (ref["status"] != "diverged")]
    if len(ref):
        acc = as_percent(summary["final_test_acc"])[ref.index].mean()
        name = method_label("allreduce", "none")
        look = style(name)
        axes[0].axhline(acc, color=look["color"], linestyle=look["linestyle"], linewidth=1.2, alpha=0.8,
                        label=f"{name} ({acc:.2f}%)")
    # ticks at the topologies' own ρ, named: a narrow log range gets unreadable automatic labels, and
    # the names say which point is which topology without a label at every point
    at = table.groupby("spectral_gap")["topology"].agg(lambda t: " / ".join(sorted(set(t)))).sort_index()
    rhos = list(at.index)
    for ax in axes:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(rhos))
        ax.xaxis.set_major_formatter(FixedFormatter([f"{name} ({r:.3g})" for r, name in at.items()]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(rhos[0] / 1.5, rhos[-1] * 1.5)
        ax.set_xlabel("topology and its spectral gap ρ (log scale)")
        for label in ax.get_xticklabels():
            label.set_rotation(35)
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
            label.set_fontsize(9)
    # at least MIN_SPAN percentage points tall: an axis of a point or two would show seed noise as an effect
    low, high = axes[0].get_ylim()
    if high - low < MIN_SPAN:
        middle = (low + high) / 2
        axes[0].set_ylim(middle - MIN_SPAN / 2, middle + MIN_SPAN / 2)
    axes[1].set_yscale("log")
    axes[0].set_ylabel("final test accuracy (%)")
    axes[1].set_ylabel("final consensus distance  (1/n) Σ‖xᵢ − x̄‖²")
    axes[0].set_title("accuracy")
    axes[1].set_title("consensus distance (log–log)")
    fig.suptitle(title or "Final accuracy and consensus distance against the spectral gap")
    fig.tight_layout()
    handles, labels = axes[0].get_legend_handles_labels()
    # every seed diverged: nothing to place on the axes, so the legend says so
    lost = table[table["acc"].isna()].groupby("method")["topology"].agg(lambda t: ", ".join(sorted(t)))
    labels = [f"{label}: every seed diverged on {lost[label]}" if label in lost else label for label in labels]
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(labels)),
               frameon=False, fontsize=10)
    return save_figure(fig, out_stem)


def draw(run_dir: Path, points, summary, out_stem: Path):
    """The (task, n) with the most runs among those with decentralized runs on >= 2 topologies."""
    if summary is None or summary.empty or "spectral_gap" not in summary:
        return "no summary with spectral gaps"
    data = iid_only(usable(summary))
    # the check a study's cells pass when its DAG is built, here on the runs
    why = requirements.accuracy_vs_spectral_gap(requirements.Grid(data))
    if why:
        return why
    dec = data[(data["algorithm"] != "allreduce") & data["spectral_gap"].notna()]
    counts = dec.groupby(["task", "nodes"]).agg(topologies=("topology", "nunique"), runs=("run_id", "size"))
    counts = counts[counts["topologies"] >= 2]
    task, nodes = counts.sort_values("runs", ascending=False).index[0]
    sel = with_methods(data[(data["task"] == task) & (data["nodes"] == nodes)])
    if "network" in sel and sel["network"].notna().any():
        # the network preset changes time, not accuracy: keep one so seeds are not double counted
        sel = sel[sel["network"] == sel["network"].mode().iloc[0]]
    sel = one_cell_per(sel, ["topology", "method"])
    title = f"Final accuracy and consensus distance against the spectral gap ({task}, n = {nodes})"
    paths = plot_accuracy_vs_spectral_gap(sel, out_stem, title=title)
    topologies = ", ".join(f"{t} (ρ = {r:.3g})" for t, r in
                           dec[(dec["task"] == task) & (dec["nodes"] == nodes)]
                           .groupby("topology")["spectral_gap"].mean().sort_values().items())
    table = spectral_table(sel)
    most = int((table["seeds"] - table["diverged"]).max()) if len(table) else 0
    spread = ("mean ± 1 std over seeds" if most >= 2 else
              "1 seed per point, so no error bars: a difference of a point or two may be seed noise")
    caption = (f"Effect of the topology at a fixed n = {nodes} workers on {task}: final test accuracy of the "
               f"averaged model (left; {spread}; the axis spans at least {MIN_SPAN:g} percentage points; "
               "horizontal line all-reduce SGD) and final consensus "
               "distance (1/n) Σ‖xᵢ − x̄‖² (right, log–log) against the spectral gap ρ of the mixing matrix, "
               f"each tick named with its topology: {topologies}. Each method in its colour, marker and line "
               "style of every figure. The theory's error term grows as ρ "
               "shrinks (Choco-SGD: n/(ρ⁴δ²T)), so accuracy should fall and consensus distance rise toward "
               "small ρ. Diverged seeds are counted next to their point and left out of the means.")
    return paths, caption
