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
from analysis.labels import colours, method_sort_key, with_methods  # noqa: E402


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
    final_test_acc, final_consensus_distance); all-reduce runs, if any, give a reference line."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    table = spectral_table(summary)
    methods = sorted(table["method"].unique(), key=method_sort_key)
    colors = colours(methods)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    for method in methods:
        g = table[table["method"] == method].sort_values("spectral_gap")
        axes[0].errorbar(g["spectral_gap"], g["acc"], yerr=g["acc_std"], color=colors[method], marker="o",
                         capsize=3, linewidth=1.2, label=method)
        axes[1].plot(g["spectral_gap"], g["consensus"], color=colors[method], marker="o", linewidth=1.2)
        for _, r in g.iterrows():
            note = f" ({r['diverged']}/{r['seeds']} diverged)" if r["diverged"] else ""
            for ax, y in ((axes[0], r["acc"]), (axes[1], r["consensus"])):
                if pd.notna(y):
                    ax.annotate(r["topology"] + note, (r["spectral_gap"], y), textcoords="offset points",
                                xytext=(4, 4), fontsize=8, color=colors[method])
    ref = usable(summary)
    ref = ref[(ref["algorithm"] == "allreduce") & (ref["status"] != "diverged")]
    if len(ref):
        acc = as_percent(summary["final_test_acc"])[ref.index].mean()
        axes[0].axhline(acc, color="grey", linestyle="--", linewidth=1.2, label=f"all-reduce ({acc:.2f}%)")
    rhos = sorted(table["spectral_gap"].dropna().unique())
    for ax in axes:
        ax.set_xscale("log")
        # ticks at the topologies' own ρ: a narrow log range gets unreadable automatic labels
        ax.xaxis.set_major_locator(FixedLocator(rhos))
        ax.xaxis.set_major_formatter(FixedFormatter([f"{r:.3g}" for r in rhos]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(rhos[0] / 1.5, rhos[-1] * 1.5)
        ax.set_xlabel("spectral gap ρ (log scale)")
    lost = table[table["acc"].isna()]
    if len(lost):
        # every seed diverged: nothing to place on the axes, so say so under them
        fig.text(0.01, -0.02, "All seeds diverged: " + "; ".join(
            f"{r['method']} on {r['topology']}" for _, r in lost.iterrows()), fontsize=9, color="firebrick")
    axes[1].set_yscale("log")
    axes[0].set_ylabel("final test accuracy (%)")
    axes[1].set_ylabel("final consensus distance  (1/n) Σ‖xᵢ − x̄‖²")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False,
               fontsize=9)
    axes[0].set_title("accuracy")
    axes[1].set_title("consensus distance (log–log)")
    fig.suptitle(title or "Final accuracy and consensus distance against the spectral gap")
    fig.tight_layout()
    return save_figure(fig, out_stem)


def draw(run_dir: Path, points, summary, out_stem: Path):
    """The (task, n) with the most runs among those with decentralized runs on >= 2 topologies."""
    if summary is None or summary.empty or "spectral_gap" not in summary:
        return "no summary with spectral gaps"
    data = iid_only(usable(summary))
    dec = data[(data["algorithm"] != "allreduce") & data["spectral_gap"].notna()]
    counts = dec.groupby(["task", "nodes"]).agg(topologies=("topology", "nunique"), runs=("run_id", "size"))
    counts = counts[counts["topologies"] >= 2]
    if counts.empty:
        return "needs decentralized runs on >= 2 topologies at one number of workers"
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
    caption = (f"Effect of the topology at a fixed n = {nodes} workers on {task}: final test accuracy of the "
               "averaged model (left; mean ± 1 std over seeds, dashed line all-reduce SGD) and final consensus "
               "distance (1/n) Σ‖xᵢ − x̄‖² (right, log–log) against the spectral gap ρ of the mixing matrix, "
               f"each point labelled with its topology: {topologies}. The theory's error term grows as ρ "
               "shrinks (Choco-SGD: n/(ρ⁴δ²T)), so accuracy should fall and consensus distance rise toward "
               "small ρ. Diverged seeds are counted in the labels and left out of the means.")
    return paths, caption
