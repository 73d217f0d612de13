"""Final test accuracy and final consensus distance against the spectral gap ρ of the topology,
at a fixed number of workers."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator  # noqa: E402

from analysis.display import as_percent, save_figure  # noqa: E402
from analysis.figures.base import figure, paper_theme, plain_log_ticks  # noqa: E402
from analysis.figures.requirements import Grid, iid_runs  # noqa: E402
from analysis.labels import method_label, method_sort_key, style, with_methods  # noqa: E402
from analysis.selection import REFERENCE, iid_only, one_cell_per, usable  # noqa: E402

MIN_SPAN = 10.0  # percentage points: the least height of the accuracy axis
LABEL_GAP = 4.0  # points: the least room between two tick labels of one row, and between two rows


def needs(grid: Grid) -> str | None:
    """Decentralized runs on >= 2 topologies at one (task, n)."""
    runs = iid_runs(grid)
    dec = runs[runs["algorithm"] != REFERENCE]
    if "spectral_gap" in dec:
        dec = dec[dec["spectral_gap"].notna()]
    if dec.groupby(["task", "nodes"])["topology"].nunique().ge(2).any():
        return None
    return "needs decentralized runs on >= 2 topologies at one number of workers"


def spectral_table(summary: pd.DataFrame, value: str = "final_test_acc") -> pd.DataFrame:
    """One row per (method, topology): ρ, mean/std final accuracy (%, of ``value``) and mean final consensus
    distance over seeds that did not diverge, and the diverged count."""
    data = with_methods(usable(summary))
    data["acc"] = as_percent(data[value])
    rows = []
    for (method, topology), g in data[data["algorithm"] != REFERENCE].groupby(["method", "topology"]):
        alive = g[g["status"] != "diverged"]
        rows.append({"method": method, "topology": topology, "spectral_gap": g["spectral_gap"].mean(),
                     "n_eff": g["n_eff"].median() if "n_eff" in g else float("nan"),
                     "acc": alive["acc"].mean(), "acc_std": alive["acc"].std() if len(alive) > 1 else 0.0,
                     "consensus": alive["final_consensus_distance"].mean(), "seeds": len(g),
                     "diverged": int((g["status"] == "diverged").sum())})
    return pd.DataFrame(rows)


def _named_ticks(ax) -> list:
    return [t for t in ax.xaxis.get_major_ticks() if t.label1.get_visible() and t.label1.get_text()]


def _rows(boxes, gap: float) -> list[int]:
    """The row of each label (its drawn extent, in pixels), taking them from left to right: the first
    row from the top where it clears the last label placed there by ``gap``."""
    ends: list[float] = []  # the right edge of each row's last label
    rows = [0] * len(boxes)
    for k in sorted(range(len(boxes)), key=lambda k: boxes[k].x0):
        rows[k] = next((r for r, end in enumerate(ends) if boxes[k].x0 >= end + gap), len(ends))
        ends[rows[k]:rows[k] + 1] = [boxes[k].x1]
    return rows


def _hang(fig, lowered: list, renderer) -> None:
    """A leader from the axis down to each lowered label (ax, tick), beneath every label (each on white),
    so that it passes behind a label of a row above rather than through it."""
    width, height = fig.bbox.width, fig.bbox.height
    for ax, tick in lowered:
        x = ax.transData.transform((tick.get_loc(), 1.0))[0]
        top, bottom = ax.get_window_extent(renderer).y0, tick.label1.get_window_extent(renderer).y1
        fig.add_artist(Line2D([x / width] * 2, [top / height, bottom / height], transform=fig.transFigure,
                              color="0.6", linewidth=0.8, zorder=-1))


def stagger_tick_labels(fig, axes, rounds: int = 4) -> None:
    """Lay the figure out (tight_layout) with no two x tick labels overlapping: measured as drawn, a
    label that would touch its left neighbour goes to the first lower row with room (close ρ, as the
    exponential graph's and Erdős–Rényi's at n = 16, take two rows), hung from a leader down from its
    ρ. Laying out moves the labels a little, so the rows are measured again until they stay."""
    base = plt.rcParams["xtick.major.pad"]
    before = None
    for _ in range(rounds):
        fig.tight_layout()
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        rows = []
        for ax in axes:
            ticks = _named_ticks(ax)
            boxes = [t.label1.get_window_extent(renderer) for t in ticks]
            step = max((b.height for b in boxes), default=0.0) * 72 / fig.dpi + LABEL_GAP
            for tick, row in zip(ticks, _rows(boxes, LABEL_GAP * fig.dpi / 72)):
                tick.set_pad(base + row * step)
                tick.label1.set_bbox({"facecolor": "white", "edgecolor": "none", "pad": 1.0})
                rows.append((ax, tick, row))
        if [r for *_, r in rows] == before:
            break
        before = [r for *_, r in rows]
    else:
        fig.tight_layout()
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
    _hang(fig, [(ax, tick) for ax, tick, row in rows if row > 0], renderer)


# where a point's name may go, in points from it, in order of preference: beside it, then further out
PLACES = [(4, 5), (4, -13), (-4, 5), (-4, -13), (4, 16), (-4, 16), (4, -24), (-4, -24), (4, 27), (-4, 27)]


def place_labels(ax, names: list[tuple[str, float, float]], renderer) -> None:
    """Name each point (text, x, y) at the first of PLACES where its label, as drawn, overlaps no label placed
    before and stays inside the axes, else where it clashes least; a thin leader joins label and point."""
    placed = []
    frame = ax.get_window_extent(renderer)
    for text, x, y in names:
        tries = []
        for dx, dy in PLACES:
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=8, color="0.3",
                                ha="left" if dx > 0 else "right",
                                arrowprops=dict(arrowstyle="-", color="0.6", linewidth=0.6, shrinkA=0, shrinkB=3))
            box = label.get_window_extent(renderer)
            clash = sum(box.overlaps(b) for b in placed) + (not frame.contains(box.x0, box.y0)) + (
                not frame.contains(box.x1, box.y1))
            tries.append((clash, len(tries), label, box))
            if clash == 0:
                break
        _, _, label, box = min(tries, key=lambda t: t[:2])
        for _, _, other, _ in tries:
            if other is not label:
                other.remove()
        placed.append(box)


def _effective_neighbours_panel(ax, table: pd.DataFrame, ylim) -> None:
    """Accuracy against n_W(0.9), each graph named once at its n_W (on the best method's point), the names
    placed apart once the figure is laid out (place_labels)."""
    named = table.dropna(subset=["n_eff", "acc"]).sort_values("acc", ascending=False).drop_duplicates("topology")
    ax.names = [(r["topology"], r["n_eff"], r["acc"]) for _, r in named.sort_values("n_eff").iterrows()]
    ax.set_ylim(*ylim)
    ax.set_xlabel("effective number of neighbours n_W(γ = 0.9)")
    ax.set_ylabel("final test accuracy (%)")
    ax.set_title("accuracy against n_W (Vogels et al. 2022)")


def plot_accuracy_vs_spectral_gap(summary: pd.DataFrame, out_stem: Path, *, title: str | None = None) -> list[Path]:
    """``summary``: one row per run at one n (algorithm, compressor, topology, status, spectral_gap,
    final_test_acc, final_consensus_distance); all-reduce runs, if any, give a reference line. Each
    method in its look (labels.style); the x ticks name each topology at its ρ."""
    paper_theme()
    table = spectral_table(summary)
    methods = sorted(table["method"].unique(), key=method_sort_key)
    looks = {m: style(m) for m in methods}
    # a third panel where the runs report the effective number of neighbours (Vogels et al. 2022)
    with_n_eff = bool(table["n_eff"].notna().any()) if len(table) else False
    fig, panels = plt.subplots(1, 3 if with_n_eff else 2, figsize=(16.5 if with_n_eff else 11, 4.6))
    axes = panels[:2]
    for method in methods:
        g = table[table["method"] == method].sort_values("spectral_gap")
        look = looks[method]
        # graphs of one ρ (complete, Base-(k+1): ρ = 1) are points apart; the line joins the means over them
        means = g.groupby("spectral_gap")[["acc", "consensus"]].mean().reset_index()
        marks = {k: v for k, v in look.items() if k != "linestyle"}
        axes[0].errorbar(g["spectral_gap"], g["acc"], yerr=g["acc_std"], capsize=3, linestyle="none", markersize=6,
                         **marks)
        axes[0].plot(means["spectral_gap"], means["acc"], linewidth=1.4, label=method, gid=f"accuracy:{method}",
                     color=look["color"], linestyle=look["linestyle"], marker=look["marker"], markersize=0)
        axes[1].plot(g["spectral_gap"], g["consensus"], linestyle="none", markersize=6, **marks)
        axes[1].plot(means["spectral_gap"], means["consensus"], linewidth=1.4, gid=f"consensus:{method}",
                     color=look["color"], linestyle=look["linestyle"])
        if with_n_eff:
            panels[2].errorbar(g["n_eff"], g["acc"], yerr=g["acc_std"], capsize=3, linewidth=0, elinewidth=1.2,
                               markersize=6, **{k: v for k, v in look.items() if k != "linestyle"})
        for _, r in g[g["diverged"] > 0].iterrows():
            for ax, y in ((axes[0], r["acc"]), (axes[1], r["consensus"])):
                if pd.notna(y):
                    ax.annotate(f"{r['diverged']}/{r['seeds']} diverged", (r["spectral_gap"], y),
                                textcoords="offset points", xytext=(4, 4), fontsize=8, color=look["color"])
    ref = usable(summary)
    ref = ref[(ref["algorithm"] == REFERENCE) & (ref["status"] != "diverged")]
    if len(ref):
        acc = as_percent(summary["final_test_acc"])[ref.index].mean()
        name = method_label(REFERENCE, "none")
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
        ax.xaxis.set_major_formatter(FixedFormatter([f"{name}\nρ = {r:.3g}" for r, name in at.items()]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(rhos[0] / 1.5, rhos[-1] * 1.5)
        ax.set_xlabel("topology and its spectral gap ρ (log scale)")
        ax.tick_params(axis="x", labelsize=9)
    # at least MIN_SPAN percentage points tall: an axis of a point or two would show seed noise as an effect
    low, high = axes[0].get_ylim()
    if high - low < MIN_SPAN:
        middle = (low + high) / 2
        axes[0].set_ylim(middle - MIN_SPAN / 2, middle + MIN_SPAN / 2)
    if with_n_eff:
        _effective_neighbours_panel(panels[2], table, axes[0].get_ylim())
    axes[1].set_yscale("log")
    axes[0].set_ylabel("final test accuracy (%)")
    axes[1].set_ylabel("final consensus distance\n(1/n) Σ‖xᵢ − x̄‖²")
    axes[0].set_title("accuracy")
    axes[1].set_title("consensus distance (log–log)")
    fig.suptitle(title or "Final accuracy and consensus distance against the spectral gap")
    plain_log_ticks(axes[1].yaxis)  # a consensus distance within a decade or two: more than two labels
    stagger_tick_labels(fig, axes)
    if with_n_eff:
        place_labels(panels[2], panels[2].names, fig.canvas.get_renderer())
    handles, labels = axes[0].get_legend_handles_labels()
    handles = [Line2D([], [], color=looks[lb]["color"], marker=looks[lb]["marker"], linestyle=looks[lb]["linestyle"])
               if lb in looks else h for h, lb in zip(handles, labels)]  # the lines carry no marker: the points do
    order = sorted(range(len(labels)), key=lambda k: labels[k] in looks)  # all-reduce first, as in every legend
    handles, labels = [handles[k] for k in order], [labels[k] for k in order]
    # every seed diverged: nothing to place on the axes, so the legend says so
    lost = table[table["acc"].isna()].groupby("method")["topology"].agg(lambda t: ", ".join(sorted(t)))
    labels = [f"{label}: every seed diverged on {lost[label]}" if label in lost else label for label in labels]
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(labels)),
               frameon=False, fontsize=10)
    return save_figure(fig, out_stem)


def chosen(summary: pd.DataFrame) -> pd.DataFrame | str:
    """The i.i.d. runs of the (task, n) with the most runs among those with decentralized runs on >= 2 topologies,
    of one network preset, one cell per (topology, method); or why there are none."""
    data = iid_only(usable(summary))
    # the check a study's cells pass when its DAG is built, here on the runs
    why = needs(Grid(data))
    if why:
        return why
    dec = data[(data["algorithm"] != REFERENCE) & data["spectral_gap"].notna()]
    counts = dec.groupby(["task", "nodes"]).agg(topologies=("topology", "nunique"), runs=("run_id", "size"))
    counts = counts[counts["topologies"] >= 2]
    task, nodes = counts.sort_values("runs", ascending=False).index[0]
    sel = with_methods(data[(data["task"] == task) & (data["nodes"] == nodes)])
    if "network" in sel and sel["network"].notna().any():
        # the network preset changes time, not accuracy: keep one so seeds are not double counted
        sel = sel[sel["network"] == sel["network"].mode().iloc[0]]
    return one_cell_per(sel, ["topology", "method"])


@figure("3. How do the graph and n set the gap to all-reduce?", order=30, needs=needs,
        intervals=("mean ± 1 std over seeds",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    """The (task, n) with the most runs among those with decentralized runs on >= 2 topologies."""
    if summary is None or summary.empty or "spectral_gap" not in summary:
        return "no summary with spectral gaps"
    return from_table(summary, out_stem)


def from_table(summary: pd.DataFrame, out_stem: Path):
    """(paths, caption) from a study's summary (chosen's runs)."""
    sel = chosen(summary)
    if isinstance(sel, str):
        return sel
    task, nodes = sel["task"].iloc[0], sel["nodes"].iloc[0]
    dec = sel[(sel["algorithm"] != REFERENCE) & sel["spectral_gap"].notna()]
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
               f"each tick named with its topology (where ρ are close, a label hangs a row lower from a leader): "
               f"{topologies}. Each method in its colour, marker and line "
               "style of every figure. The theory's error term grows as ρ "
               "shrinks (Choco-SGD: n/(ρ⁴δ²T)), so accuracy should fall and consensus distance rise toward "
               "small ρ. Diverged seeds are counted next to their point and left out of the means."
               + (" Right: the same accuracies against the effective number of neighbours n_W(γ = 0.9) of "
                  "Vogels et al. 2022 (run.json topology n_eff), which tells apart graphs of equal ρ (the "
                  "complete graph and the Base-(k+1) graphs all have ρ = 1)."
                  if "n_eff" in sel and sel["n_eff"].notna().any() else ""))
    return paths, caption
