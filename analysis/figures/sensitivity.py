"""How forgiving each method is: final validation accuracy of the tuning trials against the learning
rate (every method) and against the consensus step γ (Choco), each curve a slice through the cell's
selected point (the other knobs held at their tuned values)."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from analysis.display import save_figure  # noqa: E402
from analysis.errors import DamagedFile  # noqa: E402
from analysis.figures.base import figure, paper_theme  # noqa: E402
from analysis.figures.requirements import Grid  # noqa: E402
from analysis.labels import learn, learn_compressor, method_sort_key, style, with_methods  # noqa: E402
from analysis.tuning import knob_columns, read_tuned  # noqa: E402

SWEPT_KNOBS = ("lr", "gamma")  # what a curve is drawn against, one panel each
AXIS_LABELS = {"lr": "learning rate η (log scale)", "gamma": "consensus step γ (log scale)"}


def needs(grid: Grid) -> str | None:
    """A tuning grid of >= 2 learning rates or γ values that some cell searches."""
    for knob in SWEPT_KNOBS:
        if len(grid.tune_grid.get(knob, ())) >= 2 and any(knob in knobs for knobs in grid.tuned.values()):
            return None
    return "needs a tune: grid of >= 2 values of lr or gamma that some cell searches"


def named(run_dir: Path, trials: pd.DataFrame) -> pd.DataFrame:
    """``trials`` with each cell's method as its trials' run.json says (tune/CELL/TRIAL/run.json): the display
    names learned, so that a legend never shows a registry name even where the study's runs are not loaded, and
    a variant its options make (choco+adagossip) told apart from its base."""
    out = trials.copy()
    for cell in out["cell"].dropna().unique():
        record = next(iter(_records(Path(run_dir) / "tune" / str(cell))), {})
        said, rows = record.get("algorithm"), out["cell"] == cell
        if not isinstance(said, dict):
            continue
        base = out.loc[rows, "algorithm"].iloc[0]
        name = said["name"] if said.get("variant_of") == base and isinstance(said.get("name"), str) else base
        out.loc[rows, "algorithm"] = name
        learn(name, said)
        learn_compressor(out.loc[rows, "compressor"].iloc[0], record.get("compressor"))
    return out


def _records(cell_dir: Path):
    """The readable run.json records of a cell's trials (none: no trial folder kept)."""
    for path in sorted(cell_dir.glob("*/run.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            yield record


def _close(a, b) -> bool:
    return (pd.isna(a) and pd.isna(b)) or (pd.notna(a) and pd.notna(b) and np.isclose(float(a), float(b)))


def _along(g: pd.DataFrame, best: pd.Series, knob: str) -> list[bool]:
    """Which of a cell's trials lie on the slice through ``best`` along ``knob`` (its other knobs as best's)."""
    others = [k for k in knob_columns(g) if k != knob]
    return [all(_close(r[k], best[k]) for k in others) for _, r in g.iterrows()]


def drawn(trials: pd.DataFrame) -> pd.DataFrame:
    """The rows of tuned.csv on a slice through each cell's selected point along each knob the cell searched: those
    this figure draws (along lr and γ) and the winners' table reads (analysis.winners), a fifth of a grid's trials;
    what `analysis docs --from` keeps."""
    keep = pd.Series(False, index=trials.index)
    for _, g in trials.groupby("cell", sort=False):
        chosen = g[g["selected"].astype(bool)]
        for knob in knob_columns(g) if len(chosen) else ():
            if g[knob].nunique(dropna=True) >= 2:
                keep[g.index[_along(g, chosen.iloc[0], knob)]] = True
    return trials[keep].reset_index(drop=True)


def sensitivity_slice(trials: pd.DataFrame, knob: str) -> pd.DataFrame:
    """One row per (method, value of ``knob``) along the slice through each cell's selected trial:
    the mean/min/max of the criterion over tuning seeds, the seeds that diverged, and whether it is
    the selected value. Cells whose grid does not vary ``knob`` are left out."""
    rows = []
    for cell, g in trials.groupby("cell", sort=False):
        chosen = g[g["selected"].astype(bool)]
        if chosen.empty or g[knob].nunique(dropna=True) < 2:
            continue
        best = chosen.iloc[0]
        column = best["criterion"]
        along = g[_along(g, best, knob)]
        full = g["epochs"].max()
        done = g["epochs_done"] if "epochs_done" in g else g["epochs"]  # tables from before halving: all full
        for value, h in along.groupby(knob):
            ok = h[h["status"].isin(("completed", "paused"))][column].dropna()
            reached = float(done[h.index].min())
            rows.append({"cell": cell, "method": best["method"], "value": float(value), "criterion": column,
                         "epochs_done": reached, "full": bool(reached >= full - 1e-9),
                         "mean": ok.mean() if len(ok) else np.nan, "low": ok.min() if len(ok) else np.nan,
                         "high": ok.max() if len(ok) else np.nan, "trials": len(h),
                         "diverged": int((h["status"] == "diverged").sum()),
                         "selected": _close(value, best[knob])})
    return pd.DataFrame(rows, columns=["cell", "method", "value", "criterion", "epochs_done", "full", "mean", "low",
                                       "high", "trials", "diverged", "selected"])


def _panel(ax, table: pd.DataFrame, knob: str) -> None:
    percent = table["criterion"].iloc[0] == "val_acc"
    scale = 100.0 if percent else 1.0
    floor = np.nanmin(table["low"]) * scale if table["low"].notna().any() else 0.0
    order = sorted(table["method"].unique(), key=method_sort_key)
    for (cell, method), g in sorted(table.groupby(["cell", "method"], sort=False),
                                    key=lambda item: (order.index(item[0][1]), str(item[0][0]))):
        g = g.sort_values("value")
        look = style(method)
        color = look["color"]
        # the line joins the points that finished the full schedule; hollow markers: stopped by halving earlier
        whole = g[g["full"]]
        ax.plot(whole["value"], whole["mean"] * scale, linewidth=1.6, markersize=6, label=method, **look)
        early = g[~g["full"]]
        ax.plot(early["value"], early["mean"] * scale, linestyle="none", marker=look["marker"], markersize=6,
                markerfacecolor="white", color=color)
        spread = whole.dropna(subset=["low"])
        if (spread["high"] > spread["low"]).any():
            ax.fill_between(spread["value"], spread["low"] * scale, spread["high"] * scale, color=color, alpha=0.15)
        for _, r in g[g["selected"]].iterrows():
            ax.plot(r["value"], r["mean"] * scale, marker="*", markersize=15, color=color,
                    markeredgecolor="black", zorder=5)
        for _, r in g[g["diverged"] > 0].iterrows():
            # diverged trials have no accuracy: drawn below the lowest value, not dropped
            ax.plot(r["value"], floor - 2 if percent else floor * 0.9, marker="x", markersize=9,
                    markeredgewidth=2, color=color)
    ax.set_xscale("log")
    grid = sorted(table["value"].unique())
    ax.xaxis.set_major_locator(FixedLocator(grid))  # the grid's own values, not powers of ten
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{v:g}" for v in grid])
    ax.set_xlabel(AXIS_LABELS.get(knob, knob))
    column = table["criterion"].iloc[0]
    ax.set_ylabel({"val_acc": "final validation accuracy (%)", "val_ppl": "final validation perplexity"}
                  .get(column, f"final {column}"))


def plot_sensitivity(trials: pd.DataFrame, out_stem: Path, *, title: str | None = None) -> list[Path]:
    """``trials``: tuned.csv rows (cell, algorithm, compressor, status, the knobs, criterion columns,
    criterion, selected)."""
    paper_theme()
    trials = with_methods(trials)
    panels = [(k, sensitivity_slice(trials, k)) for k in SWEPT_KNOBS]
    panels = [(k, t) for k, t in panels if len(t)]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.6 * len(panels), 4.6), squeeze=False)
    for ax, (knob, table) in zip(axes.flat, panels):
        _panel(ax, table, knob)
        ax.set_title({"lr": "against the learning rate", "gamma": "against γ (Choco)"}[knob])
    # one legend for both panels, below them (off the stars): every method drawn, in legend order
    drawn = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            drawn.setdefault(label, handle)
    names = sorted(drawn, key=method_sort_key)
    handles = [drawn[m] for m in names]
    every = pd.concat([t for _, t in panels])
    if (~every["full"].astype(bool)).any():
        handles.append(Line2D([], [], color="0.3", marker="o", markerfacecolor="white", linestyle="none",
                              label="stopped early by halving"))
    handles.append(Line2D([], [], color="0.3", marker="*", markersize=13, markeredgecolor="black", linestyle="none",
                          label="selected"))
    if (every["diverged"] > 0).any():
        handles.append(Line2D([], [], color="0.3", marker="x", markersize=8, markeredgewidth=2, linestyle="none",
                              label="diverged"))
    fig.suptitle(title or "Sensitivity to the tuned hyper-parameters")
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(handles)),
               frameon=False, fontsize=10)
    return save_figure(fig, out_stem)


@figure("6. How sensitive is each method to its knobs?", order=80, needs=needs,
        intervals=("shading: the least to the greatest tuning seed",))
def draw(run_dir: Path, points, summary, out_stem: Path):
    path = Path(run_dir) / "tuned.csv"
    try:
        trials = read_tuned(run_dir)
    except DamagedFile as err:  # this figure is not drawn; the others are
        return str(err)
    if trials is None:
        return f"no {path} (a study with a `tune:` grid writes it)"
    if trials.empty or not trials["selected"].astype(bool).any():
        return f"{path} has no selected trial"
    return from_table(named(run_dir, trials), out_stem)


def from_table(trials: pd.DataFrame, out_stem: Path):
    """(paths, caption) from tuned.csv's rows (all, or those ``drawn`` keeps), each cell's method named; or the
    reason there is no figure."""
    varied = [k for k in SWEPT_KNOBS if not sensitivity_slice(with_methods(trials), k).empty]
    if not varied:
        return "the tuning grid varies neither the learning rate nor γ"
    task = ", ".join(sorted(trials["task"].astype(str).unique()))
    paths = plot_sensitivity(trials, out_stem, title=f"Sensitivity to the tuned hyper-parameters ({task})")
    budget = trials["epochs"].median()
    seeds = trials.groupby(["cell"] + knob_columns(trials), dropna=False).size().max()
    caption = (f"Tuning trials of {task} ({trials['cell'].nunique()} cells, "
               f"successive halving to {budget:g} epochs, {seeds} seed(s) per grid point): last validation "
               f"{'accuracy' if trials['criterion'].dropna().eq('val_acc').all() else 'metric'} on a split held "
               "out of the training set (never the test set) against the learning rate (left) and against "
               "Choco's consensus step γ (right, Choco with a compressor only). Each curve is a slice through the "
               "cell's selected trial (★): the other tuned knobs stay at their selected values; the line joins the "
               "points that finished the whole schedule, hollow markers are points halving stopped earlier (at "
               "their last rung's score, lower for being shorter); shading: the least to the greatest tuning seed; "
               "× marks "
               "diverged trials. A flat curve is a forgiving method; the paper tuned every "
               "method's learning rate and γ on such grids before comparing them.")
    return paths, caption
