"""Final accuracy gap of decentralized methods to all-reduce SGD against the number of workers,
one line per topology."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis.figures.requirements import Grid, iid_runs  # noqa: E402
from analysis.colours import topology_style  # noqa: E402
from analysis.labels import method_sort_key, style, with_methods  # noqa: E402
from analysis.selection import REFERENCE, iid_only, one_cell_per, usable  # noqa: E402


def needs(grid: Grid) -> str | None:
    """All-reduce and a decentralized method at >= 2 shared node counts of one task, and one decentralized
    (topology, method) at >= 2 node counts: a gap against n is a line."""
    why = "needs all-reduce and decentralized runs at >= 2 node counts of one task"
    for _, g in iid_runs(grid).groupby("task"):  # any task will do: a study of several is drawn on its best
        ref = g["algorithm"] == REFERENCE
        if len(set(g.loc[ref, "nodes"]) & set(g.loc[~ref, "nodes"])) < 2:
            continue
        spread = g[~ref].groupby(["topology", "algorithm", "compressor"])["nodes"].nunique()
        if (spread >= 2).any():
            return None
        why = "no decentralized (topology, method) run at >= 2 node counts"
    return why


def gap_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (topology, method, nodes): all-reduce's mean final accuracy at that n minus the
    method's mean over seeds that did not diverge (percentage points), its std, and seed counts."""
    data = with_methods(usable(summary))
    data["acc"] = as_percent(data["final_test_acc"])
    ok = data["status"] != "diverged"
    ref = data[ok & (data["algorithm"] == REFERENCE)].groupby("nodes")["acc"].mean()
    dec = data[(data["algorithm"] != REFERENCE) & data["nodes"].isin(ref.index)]
    rows = []
    for (topology, method, nodes), g in dec.groupby(["topology", "method", "nodes"]):
        alive = g[g["status"] != "diverged"]
        rows.append({"topology": topology, "method": method, "nodes": nodes, "spectral_gap": g["spectral_gap"].mean(),
                     "gap": ref[nodes] - alive["acc"].mean() if len(alive) else float("nan"),
                     "gap_std": alive["acc"].std() if len(alive) > 1 else 0.0,
                     "seeds": len(g), "diverged": int((g["status"] == "diverged").sum())})
    return pd.DataFrame(rows, columns=["topology", "method", "nodes", "spectral_gap", "gap", "gap_std", "seeds",
                                       "diverged"])


def plot_gap_vs_nodes(summary: pd.DataFrame, out_stem: Path, *, title: str | None = None) -> list[Path]:
    """``summary``: one row per run of one task (algorithm, compressor, topology, nodes, status,
    final_test_acc, spectral_gap), all-reduce runs included as the reference. One panel per method,
    in the method's colour (labels.style), one line per topology in its marker and line style
    (colours.topology_style); the panels share their y-axis."""
    paper_theme()
    table = gap_table(summary)
    topologies = sorted(table["topology"].unique())
    methods = sorted(table["method"].unique(), key=method_sort_key)
    shapes = {t: topology_style(t, topologies) for t in topologies}
    finite = table["gap"].dropna()
    top = (finite + table.loc[finite.index, "gap_std"]).max() if len(finite) else 1.0
    nodes = sorted(table["nodes"].unique())
    ncols = min(3, len(methods))
    nrows = -(-len(methods) // ncols)
    # one panel per method keeps "one line per topology" readable when several methods ran
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.6 * nrows + 0.4), sharey=True, squeeze=False)
    for ax, method in zip(axes.flat, methods):
        color = style(method)["color"]
        for topology, g in table[table["method"] == method].groupby("topology"):
            g = g.sort_values("nodes")
            bars = ax.errorbar(g["nodes"], g["gap"], yerr=g["gap_std"], color=color, capsize=3, linewidth=1.6,
                               markersize=7, label=topology, **shapes[topology])
            bars.lines[0].set_gid(f"gap:{method}:{topology}")
            for _, r in g[g["diverged"] > 0].iterrows():
                # a point whose seeds all diverged has no gap: it sits at the top, marked, not dropped
                y = r["gap"] if pd.notna(r["gap"]) else top * 1.1 + 0.5
                ax.plot(r["nodes"], y, marker="x", markersize=10, markeredgewidth=2, color=color)
                last = r["nodes"] == max(nodes)  # the last n's label reads leftward, inside the panel
                ax.annotate(f"{topology}: {r['diverged']}/{r['seeds']} diverged", (r["nodes"], y),
                            textcoords="offset points", ha="right" if last else "left", va="top", fontsize=8,
                            xytext=(-7 if last else 7, -6 - 11 * topologies.index(topology)), color=color)
        ax.axhline(0, color="grey", linewidth=1)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(nodes))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(n) for n in nodes])
        ax.set_xlim(min(nodes) / 1.3, max(nodes) * 1.6)  # room for the labels of the last points
        ax.set_xlabel("number of workers n (log scale)")
        ax.set_title(method, color=color if len(methods) > 1 else "black", fontsize=11)
    for ax in axes.flat[len(methods):]:
        ax.remove()
    for row in axes:
        row[0].set_ylabel("accuracy gap to all-reduce,\naveraged model (percentage points)")
    fig.suptitle(title or "Final test accuracy gap to all-reduce SGD against n")
    fig.tight_layout()
    # one legend for every panel, below them: the topologies in grey (colour is the panel's method)
    handles = [Line2D([], [], color="0.35", linewidth=1.6, markersize=7, label=t, **shapes[t]) for t in topologies]
    if (table["diverged"] > 0).any():
        handles.append(Line2D([], [], color="0.35", marker="x", linestyle="none", markersize=9, markeredgewidth=2,
                              label="seeds diverged"))
    fig.legend(handles=handles, title="topology", loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(6, len(handles)), frameon=False, fontsize=10)
    return save_figure(fig, out_stem)


def chosen(summary: pd.DataFrame) -> pd.DataFrame | str:
    """The runs the figure draws (i.i.d. data, one network, one cell per (topology, method, n)): the task with
    all-reduce at the most node counts that decentralized runs share (>= 2 needed); else why there are none."""
    data = iid_only(usable(summary))
    data = data[pd.to_numeric(data["final_test_acc"], errors="coerce").notna()]
    # the check a study's cells pass when its DAG is built, here on the runs
    why = needs(Grid(data))
    if why:
        return why
    best = None
    for task, g in data.groupby("task"):
        if needs(Grid(g)):
            continue  # e.g. n = 1 and 4 of lsq beside a scaling study of another task: no line against n
        ref_n = set(g.loc[g["algorithm"] == REFERENCE, "nodes"])
        shared = ref_n & set(g.loc[g["algorithm"] != REFERENCE, "nodes"])
        if len(shared) >= 2 and (best is None or len(shared) > best[1]):
            best = (task, len(shared))
    sel = with_methods(data[data["task"] == best[0]])
    if "network" in sel and sel["network"].notna().any():
        # the network preset changes time, not accuracy: keep one so seeds are not double counted
        sel = sel[sel["network"] == sel["network"].mode().iloc[0]]
    sel = one_cell_per(sel, ["topology", "method", "nodes"])
    # a line against n needs two n: pairs run at one n only (e.g. a spectral block) are left out
    dec = sel["algorithm"] != REFERENCE
    spread = sel[dec].groupby(["topology", "method"])["nodes"].transform("nunique")
    if not dec.any() or (spread < 2).all():
        return "no decentralized (topology, method) run at >= 2 node counts"
    return pd.concat([sel[~dec], sel[dec][spread >= 2]])


def _seed_counts(table: pd.DataFrame) -> list[int]:
    """The numbers of seeds that did not diverge of gap_table's points, each once, in order."""
    alive = (table["seeds"] - table["diverged"]).astype(int)
    return sorted(set(alive[alive > 0])) or [0]  # a point whose seeds all diverged is a × with no mean


def _seeds_text(counts: list[int]) -> str:
    return (f"{counts[0]} seed{'s' if counts[0] != 1 else ''}" if len(counts) == 1
            else f"{counts[0]} to {counts[-1]} seeds")


def alt_text(summary: pd.DataFrame) -> str:
    """What the figure of chosen's runs shows, in a sentence (a doc's image text), its seed count the runs'."""
    sel = chosen(summary)
    if isinstance(sel, str):
        raise ValueError(f"no gap_vs_nodes figure: {sel}")
    table = gap_table(sel)
    spread = ("mean ± 1 standard deviation over" if _seed_counts(table)[-1] > 1 else "one run of")
    return (f"{sel['task'].iloc[0]}: the averaged model's accuracy gap to all-reduce against n, on "
            f"{' and '.join(sorted(table['topology'].unique()))}, for "
            f"{' and '.join(sorted(table['method'].unique(), key=method_sort_key))} "
            f"({spread} {_seeds_text(_seed_counts(table))})")


@figure("3. How do the graph and n set the gap to all-reduce?", order=20, needs=needs,
        intervals=("error bars ± 1 standard deviation over seeds",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The figure of chosen's runs."""
    if summary is None or summary.empty or "final_test_acc" not in summary:
        return "no summary with final test accuracy"
    return from_table(summary, out_stem)


def from_table(summary: pd.DataFrame, out_stem: Path):
    """(paths, caption) from a study's summary (chosen's runs), or the reason there is no figure."""
    sel = chosen(summary)
    if isinstance(sel, str):
        return sel
    task = sel["task"].iloc[0]
    paths = plot_gap_vs_nodes(sel, out_stem, title=f"Final test accuracy gap to all-reduce SGD against n ({task})")
    table = gap_table(sel)
    counts = _seed_counts(table)
    seeds = f"{_seeds_text(counts)} per point"
    bars = ("no error bars: one seed cannot give a spread" if counts[-1] < 2 else
            "error bars ± 1 standard deviation over seeds, where a point has two or more")
    caption = (f"Accuracy gap to centralized training on {task}, read on the averaged model x̄ (final_test_acc; "
               "the claims read the workers' own models where every run scored them all, so a verdict and this "
               "figure can differ): all-reduce SGD's mean final test accuracy at each number of workers n minus "
               f"each decentralized method's mean over seeds (percentage points; {seeds}; {bars}; log-scale n), "
               "one panel per method in its colour "
               "and one line per topology in its marker and line style "
               f"({', '.join(sorted(table['topology'].unique()))}). A sparser topology has a smaller spectral gap "
               "at the same n; the paper finds the gap grows as the spectral gap shrinks (ring worse than torus "
               "at large n). The panels share their y-axis. × marks points with diverged seeds, which are left "
               "out of the mean. Topology and "
               "method pairs run at a single n are not drawn; the per-cell table has them.")
    return paths, caption
