"""Hyper-parameter selection from a study's tuning trials.

A tuning trial is an ordinary run directory (run.json + metrics.parquet) under
``results/<study>/tune/<cell>/<trial>/``, trained on the training split minus a validation split
(``val_fraction``) for a fraction of the final epochs. The selection reads only the validation
metrics, never the test set: the grid point with the best final validation accuracy, averaged over
its tuning seeds (lower validation perplexity for language models, lower validation loss where
there is no accuracy), ties broken by the lower validation loss. Diverged trials are kept in the
table; a grid point with a diverged seed is never selected.

``python -m analysis tune select CELL_DIR --out best.yaml``: the chosen values of one cell.
``python -m analysis tune table STUDY_DIR``: every trial of every cell, ``STUDY_DIR/tuned.csv``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd
import yaml

from analysis.files import write_text_atomically
from analysis.load import record_problem

# the knobs a tuning grid may search (each a `bench run` setting)
TUNABLE = ("lr", "weight_decay", "gamma", "momentum")
COLUMNS = ["cell", "trial", "status", "task", "algorithm", "compressor", "topology", "nodes", "data",
           "lr", "weight_decay", "gamma", "momentum", "epochs", "val_fraction", "criterion",
           "val_acc", "val_ppl", "val_loss", "selected"]


class SelectionError(Exception):
    """Nothing to select from: reported as one line, exit status 2."""


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def read_trial(path: Path) -> dict | None:
    """One trial's row, or None when its files are missing or unreadable (an unfinished trial)."""
    try:
        record = json.loads((path / "run.json").read_text())
        metrics = pd.read_parquet(path / "metrics.parquet")
    except Exception:  # missing, truncated or foreign files: the trial is not there yet
        return None
    if record_problem(record):  # a wrong type in run.json: not a trial to select from
        return None
    cfg = record.get("config", {})
    last = metrics.iloc[-1] if len(metrics) else pd.Series(dtype=float)
    gamma = (record.get("gamma") or {}).get("value")
    return {
        "cell": path.parent.name, "trial": path.name, "status": record.get("status", "unknown"),
        **{k: cfg.get(k) for k in ("task", "algorithm", "compressor", "topology", "nodes", "data")},
        "lr": _num(cfg.get("lr")), "weight_decay": _num(cfg.get("weight_decay")),
        "gamma": _num(gamma), "momentum": _num(cfg.get("momentum")), "epochs": _num(cfg.get("epochs")),
        "val_fraction": _num(cfg.get("val_fraction")),
        **{k: _num(last.get(k)) for k in ("val_acc", "val_ppl", "val_loss")},
    }


def read_trials(cell_dir: Path) -> pd.DataFrame:
    rows = [row for p in sorted(Path(cell_dir).iterdir()) if p.is_dir() and (row := read_trial(p))]
    return pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("criterion", "selected")])


def criterion(trials: pd.DataFrame) -> tuple[str, bool]:
    """(column, higher is better) the selection ranks by."""
    for column, higher in (("val_acc", True), ("val_ppl", False), ("val_loss", False)):
        if column in trials and trials[column].notna().any():
            return column, higher
    raise SelectionError("no trial has a validation metric (val_acc, val_ppl or val_loss): were the trials "
                         "run with val_fraction > 0?")


def grid_points(trials: pd.DataFrame) -> pd.Series:
    """A label per trial naming its grid point (the tuned knobs' values); the tuning seeds of one
    point share it."""
    knobs = [k for k in TUNABLE if k in trials]
    return trials[knobs].apply(lambda row: "|".join(f"{k}={row[k]!r}" for k in knobs), axis=1)


def select(trials: pd.DataFrame) -> pd.DataFrame:
    """``trials`` of one cell with ``criterion`` and ``selected`` added: the trials (one per tuning
    seed) of the grid point with the best mean criterion over its seeds. A point with a seed that
    diverged or failed is never selected: an LR that diverges on some seeds is not a safe choice."""
    if trials.empty:
        raise SelectionError("no finished trials to select from")
    column, higher = criterion(trials)
    out = trials.assign(criterion=column, selected=False)
    point = grid_points(out)
    ok = (out["status"] == "completed") & out[column].notna()
    stable = ok.groupby(point).transform("all")
    if not stable.any():
        raise SelectionError(f"every grid point of the {len(out)} trials has a diverged or failed seed; widen "
                             "the grid towards smaller learning rates")
    scores = out[stable].assign(_point=point[stable], _loss=out["val_loss"].fillna(math.inf)).groupby("_point").agg(
        score=(column, "mean"), loss=("_loss", "mean"))
    scores["key"] = scores["score"] if higher else -scores["score"]
    # best score, then lower loss, then (full ties) the first label
    best = scores.reset_index().sort_values(["key", "loss", "_point"], ascending=[False, True, True]).iloc[0]
    out.loc[point == best["_point"], "selected"] = True
    return out


def chosen_values(trials: pd.DataFrame, keys: list[str]) -> dict:
    """The selected trial's values of ``keys`` (the searched knobs), as plain numbers."""
    row = trials[trials["selected"]].iloc[0]
    return {k: float(row[k]) for k in keys if k in row and pd.notna(row[k])}


def cmd_select(args) -> int:
    cell_dir = Path(args.cell_dir)
    if not cell_dir.is_dir():
        raise SelectionError(f"tuning directory not found: {cell_dir}")
    trials = select(read_trials(cell_dir))
    keys = args.keys or [k for k in TUNABLE if trials[k].nunique(dropna=True) > 1]
    values = chosen_values(trials, keys)
    chosen = trials[trials["selected"]]
    column = chosen["criterion"].iloc[0]
    score = chosen[column].mean()
    note = (f"# tuned on {len(trials)} trials of {cell_dir.name}: best mean {column} = {score:.4g} over "
            f"{len(chosen)} seed(s) ({', '.join(chosen['trial'])})\n")
    write_text_atomically(Path(args.out), note + yaml.safe_dump(values, sort_keys=True))
    print(f"{cell_dir.name}: {values} ({column} {score:.4g}) -> {args.out}")
    return 0


def study_table(study_dir: Path) -> pd.DataFrame:
    """Every trial of every cell under ``study_dir/tune``, with the selection marked."""
    tune = Path(study_dir) / "tune"
    if not tune.is_dir():
        raise SelectionError(f"no tuning trials: {tune} does not exist")
    frames = []
    for cell_dir in sorted(p for p in tune.iterdir() if p.is_dir()):
        trials = read_trials(cell_dir)
        if len(trials):
            try:
                frames.append(select(trials))
            except SelectionError:  # all diverged: still reported, nothing selected
                frames.append(trials.assign(criterion=None, selected=False))
    if not frames:
        raise SelectionError(f"no finished trials under {tune}")
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def _at_edge(values: pd.Series, chosen: float, knob: str = "") -> bool:
    """Whether ``chosen`` is the smallest or largest of a grid of at least three values (then the
    optimum may lie outside the grid). Not an edge: zero at the bottom (no weight decay is a real
    choice) and γ = 1 at the top (γ cannot exceed 1)."""
    grid = sorted(values.dropna().unique())
    top = chosen == grid[-1] and not (knob == "gamma" and chosen == 1.0) if grid else False
    return len(grid) >= 3 and (top or (chosen == grid[0] and chosen != 0))


def tuning_markdown(study_dir: Path) -> str | None:
    """The report's section: per cell, the selected values, its validation score, and how many
    trials ran and diverged; None when the study was not tuned."""
    path = Path(study_dir) / "tuned.csv"
    if not path.is_file():
        return None
    table = pd.read_csv(path)
    rows = []
    for cell, g in table.groupby("cell", sort=True):
        best = g[g["selected"].astype(bool)]
        knobs = [k for k in TUNABLE if g[k].nunique(dropna=True) > 1]
        chosen = ", ".join(f"{k} = {best[k].iloc[0]:g}{' (edge)' if _at_edge(g[k], best[k].iloc[0], k) else ''}"
                           for k in knobs) if len(best) else "nothing (all diverged)"
        score = f"{best[best['criterion'].iloc[0]].mean():.4g}" if len(best) else "—"
        rows.append(f"| {cell} | {chosen} | {score} | {len(g)} | {int((g['status'] == 'diverged').sum())} |")
    criterion = ", ".join(sorted(table["criterion"].dropna().unique())) or "—"
    epochs = table["epochs"].median()
    head = (f"Each cell's grid ran {epochs:g} epochs per trial on the training set minus a "
            f"{table['val_fraction'].median():g} validation split; the best final {criterion} was selected "
            "(diverged trials never are) and the cell's final runs use it on the full training set. "
            "\"(edge)\" marks a value at the end of a grid of three or more, where the optimum may lie outside "
            "it: widen that grid. All trials: `tuned.csv`.\n\n")
    return head + "| cell | selected | " + criterion + " | trials | diverged |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n"


def cmd_table(args) -> int:
    table = study_table(Path(args.study_dir))
    out = Path(args.study_dir) / "tuned.csv"
    write_text_atomically(out, table.to_csv(index=False))
    chosen = table[table["selected"]]
    print(f"{len(table)} trials of {table['cell'].nunique()} cells ({len(chosen)} selected) -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis tune", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("select", help="the chosen values of one cell's trials, as YAML")
    p.add_argument("cell_dir")
    p.add_argument("--out", required=True)
    p.add_argument("--keys", nargs="+", choices=TUNABLE, help="knobs to write (default: those that vary)")
    p.set_defaults(run=cmd_select)
    p = sub.add_parser("table", help="STUDY_DIR/tuned.csv of every trial")
    p.add_argument("study_dir")
    p.set_defaults(run=cmd_table)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except SelectionError as err:
        print(f"analysis tune: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
