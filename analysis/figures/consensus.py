"""Consensus error of Choco-Gossip and exact gossip against rounds and against bits sent."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis.files import write_atomically  # noqa: E402


def plot_consensus(traces: pd.DataFrame, out_stem: Path) -> list[Path]:
    """``traces``: columns method, gamma, step, rel_error, bits_per_worker (tidy, one row per point)."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1)
    data = traces.copy()
    data["label"] = [m if m == "exact" else f"{m} (γ={g:.3g})" for m, g in zip(data["method"], data["gamma"])]
    data["mbit_per_worker"] = data["bits_per_worker"] / 1e6
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, x, xlabel in ((axes[0], "step", "gossip rounds"), (axes[1], "mbit_per_worker", "Mbit sent per worker")):
        sns.lineplot(data=data, x=x, y="rel_error", hue="label", ax=ax, linewidth=1.6)
        ax.set_yscale("log")
        # exact gossip hits float64 round-off (~1e-28) quickly; the interesting range is above 1e-10
        ax.set_ylim(1e-10, 3)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("consensus error / initial")
        ax.axhline(1e-4, color="grey", linestyle=":", linewidth=1)
    axes[1].set_xscale("log")
    axes[0].get_legend().remove()
    axes[1].legend(title=None, fontsize=8)
    fig.suptitle("Average consensus: Choco-Gossip with compression vs exact gossip")
    fig.tight_layout()
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".pdf")]
    for path in paths:
        write_atomically(path, lambda tmp, fmt=path.suffix[1:]: fig.savefig(tmp, dpi=150, format=fmt))
    plt.close(fig)
    return paths

