"""Consensus error of Choco-Gossip and exact gossip against rounds and against bits sent."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from analysis.consensus import read_trace  # noqa: E402
from analysis.display import save_figure  # noqa: E402
from analysis.errors import DamagedFile  # noqa: E402
from analysis.figures.base import figure, paper_theme, plain_log_ticks  # noqa: E402
from analysis.figures.requirements import Grid  # noqa: E402
from analysis.labels import compressor_label, compressor_order, styles_with  # noqa: E402
from analysis.units import bits_label  # noqa: E402

EXACT = "exact"
MARK_EVERY = 0.1


def needs(grid: Grid) -> str | None:
    """A consensus: block with methods to run."""
    return None if grid.consensus.get("methods") else "needs a consensus: block with its methods"


def consensus_looks(methods) -> dict:
    """trace method -> style: each compressor in the look Choco-SGD with that compressor has in the
    study's other figures (Choco-Gossip is its communication step), exact gossip in D-PSGD's."""
    pairs = {m: ("dpsgd", "none") if m == EXACT else ("choco", m) for m in methods}
    looks = styles_with(pairs.values())
    return {m: looks[pair] for m, pair in pairs.items()}


def plot_consensus(traces: pd.DataFrame, out_stem: Path) -> list[Path]:
    """``traces``: columns method, gamma, step, rel_error, bits_per_worker (tidy, one row per point; a
    point recorded by several seeds is drawn at their median). On the bits axis (log) the start is
    left out: at round 0 nothing has been sent, and 0 has no place on a log axis."""
    paper_theme()
    data = traces.copy()
    data["mbit_per_worker"] = data["bits_per_worker"] / 1e6
    methods = sorted(data["method"].astype(str).unique(), key=lambda m: (m != EXACT, compressor_order(m)))
    looks = consensus_looks(methods)
    gammas = data.groupby("method")["gamma"].median()
    names = {m: "exact gossip" if m == EXACT else f"{compressor_label(m)} (γ = {gammas[m]:.3g})" for m in methods}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, x, xlabel in ((axes[0], "step", "gossip rounds"),
                          (axes[1], "mbit_per_worker", bits_label() + " (log scale)")):
        for method in methods:
            m = data[data["method"] == method].groupby("step")[[x, "rel_error"]].median().reset_index(drop=True)
            if x == "mbit_per_worker":
                m = m[m[x] > 0]
            m = m[np.isfinite(m["rel_error"]) & (m["rel_error"] > 0)]
            ax.plot(m[x], m["rel_error"], linewidth=1.6, markersize=5, markevery=MARK_EVERY, label=names[method],
                    **looks[method])
        ax.set_yscale("log")
        # exact gossip hits float64 round-off (~1e-28) quickly; the interesting range is above 1e-10
        ax.set_ylim(1e-10, 3)
        ax.set_xlabel(xlabel)
        ax.axhline(1e-4, color="grey", linestyle=":", linewidth=1)
    axes[0].set_ylabel("consensus error / initial")
    axes[1].set_xscale("log")
    sent = data.loc[data["mbit_per_worker"] > 0, "mbit_per_worker"]
    if len(sent):  # the axis starts at the first round's bits: no empty stretch before any was sent
        axes[1].set_xlim(sent.min() / 1.2, sent.max() * 1.2)
        plain_log_ticks(axes[1].xaxis)  # a decade or two of Mbit: more than two labels
    handles = [Line2D([], [], linewidth=1.6, markersize=6, label=names[m], **looks[m]) for m in methods]
    handles.append(Line2D([], [], color="grey", linestyle=":", linewidth=1, label="10⁻⁴"))
    fig.suptitle("Average consensus: Choco-Gossip with compression vs exact gossip")
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(3, len(handles)),
               frameon=False, fontsize=10)
    return save_figure(fig, out_stem)


# drawn from consensus/traces.csv, not from the runs: a note about the runs is no reason it was not drawn
@figure("1. Does compressed gossip reach consensus?", order=50, needs=needs, reads_runs=False)
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The consensus figure from every ``traces.csv`` under the results directory."""
    files = sorted(Path(run_dir).rglob("traces.csv"))
    if not files:
        return f"no traces.csv under {run_dir} (written by `bench consensus --out`)"
    try:
        traces = pd.concat([read_trace(f) for f in files], ignore_index=True)
    except (OSError, ValueError, DamagedFile) as err:
        return f"a consensus trace cannot be read: {' '.join(str(err).split())}"
    first = traces.iloc[0]
    caption = (f"Average consensus (Choco-Gossip, no gradient) on a {first['topology']} of n = {first['nodes']} "
               f"workers (spectral gap ρ = {first['spectral_gap']:.3g}), d = {first['dim']}: consensus error "
               "relative to the start against gossip rounds (left) and against Mbit a worker put on its links (right, "
               "log scale, from the first round on: round 0 sends nothing, so it has no place on that axis), for "
               "each compressor (γ as shown) and for exact gossip, each in the colour and marker its Choco-SGD "
               "method (exact gossip: D-PSGD's) has in the other figures. The dotted line marks 10⁻⁴. "
               "The paper expects linear convergence for every compressor, at a rate set by ρ²δ, so the "
               "compressed methods need more rounds but fewer bits.")
    return plot_consensus(traces, out_stem), caption
