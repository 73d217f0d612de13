"""Hyper-parameter selection from a study's tuning trials.

A tuning trial is an ordinary run directory (run.json + metrics.parquet) under
``results/<study>/tune/<cell>/<trial>/``, trained on the training split minus a validation split
(``val_fraction``). Trials are run by successive halving (bench/pipeline/halving.py): every grid
point to a short budget, the best third continued to a longer one, the best of those to the full
schedule. Each ranking reads only the validation metrics, never the test set: the best validation
accuracy averaged over the point's tuning seeds (lower validation perplexity for language models,
lower validation loss where there is no accuracy), ties broken by the lower validation loss. A grid
point with a diverged seed is never ranked; the final choice is made among the trials that finished
the full schedule.

``python -m analysis tune rank CELL_DIR --at EPOCHS``: the points that reached EPOCHS, best first, as
JSON, with the knobs whose best value lies at the edge of the grid and the value one step beyond.
``python -m analysis tune select CELL_DIR --out best.yaml``: the chosen values of one cell.
``python -m analysis tune table STUDY_DIR``: every trial of every cell, ``STUDY_DIR/tuned.csv``.
"""
from __future__ import annotations

import io
import json
import math
import sys
from pathlib import Path

import pandas as pd
import yaml

from analysis.argparsing import Parser
from analysis.errors import UsageError
from analysis.files import read_regular, write_text_atomically
from analysis.checks import DamagedFile, read_table, record_problem
from analysis.report_html import md_text

# the knobs every trial table has: the tunable run settings and γ (the knob of the methods with a consensus step);
# a trial of a method with other tunable knobs (CEDAS's copy_step, ...) adds a column for each, named by its run.json
TUNABLE = ("lr", "weight_decay", "gamma", "momentum")
# the bounds of the algorithms' knobs, for runs written before run.json carried them (algorithm.knobs)
KNOB_HIGHS_BEFORE = {"gamma": 1.0}
COLUMNS = ["cell", "trial", "status", "task", "algorithm", "compressor", "topology", "nodes", "data",
           "lr", "weight_decay", "gamma", "momentum", "epochs", "epochs_done", "val_fraction", "criterion",
           "val_acc", "val_ppl", "val_loss", "selected"]
# statuses of a trial that trained without trouble up to where it stands (paused: a halving rung)
SOUND = ("completed", "paused")


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
        record = json.loads(read_regular(path / "run.json"))
        metrics = pd.read_parquet(io.BytesIO(read_regular(path / "metrics.parquet")))
    except Exception:  # missing, truncated or foreign files: the trial is not there yet
        return None
    if record_problem(record):  # a wrong type in run.json: not a trial to select from
        return None
    cfg = record.get("config", {})
    last = metrics.iloc[-1] if len(metrics) else pd.Series(dtype=float)
    gamma = (record.get("gamma") or {}).get("value")
    return {**method_knobs(record),
        "cell": path.parent.name, "trial": path.name, "status": record.get("status", "unknown"),
        **{k: cfg.get(k) for k in ("task", "algorithm", "compressor", "topology", "nodes", "data")},
        "lr": _num(cfg.get("lr")), "weight_decay": _num(cfg.get("weight_decay")),
        "gamma": _num(gamma), "momentum": _num(cfg.get("momentum")), "epochs": _num(cfg.get("epochs")),
        "epochs_done": _num(last.get("epoch")), "val_fraction": _num(cfg.get("val_fraction")),
        **{k: _num(last.get(k)) for k in ("val_acc", "val_ppl", "val_loss")},
    }


def method_knobs(record: dict) -> dict[str, float]:
    """The values of the knobs the trial's method declares tunable (run.json: algorithm.knobs, algorithm.options),
    beyond γ, which has its own column; none for a record that does not say."""
    algorithm = record.get("algorithm")
    if not isinstance(algorithm, dict) or not isinstance(algorithm.get("knobs"), dict):
        return {}
    options = algorithm.get("options") if isinstance(algorithm.get("options"), dict) else {}
    return {name: _num(options.get(name, info.get("default"))) for name, info in algorithm["knobs"].items()
            if isinstance(info, dict) and info.get("tune") and name not in TUNABLE}


def knob_columns(trials: pd.DataFrame) -> list[str]:
    """The knob columns of a trial table: TUNABLE's, then each method knob a trial carries (a numeric column beyond
    COLUMNS; what the analysis adds, such as the method's label, is text)."""
    return [k for k in TUNABLE if k in trials] + sorted(
        c for c in trials.columns if c not in COLUMNS and pd.api.types.is_numeric_dtype(trials[c]))


def read_trials(cell_dir: Path) -> pd.DataFrame:
    """The trials of a cell; ``attrs["knob_highs"]``: the largest value each algorithm knob takes, as the runs'
    records say (a grid is never extended past it)."""
    paths = [p for p in sorted(Path(cell_dir).iterdir()) if p.is_dir()]
    rows = [row for p in paths if (row := read_trial(p))]
    extra = sorted({k for row in rows for k in row} - set(COLUMNS))
    frame = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("criterion", "selected")] + extra)
    frame.attrs["knob_highs"] = _knob_highs(paths)
    return frame


def _knob_highs(paths: list[Path]) -> dict[str, float]:
    highs = dict(KNOB_HIGHS_BEFORE)
    for path in paths:
        try:
            knobs = json.loads(read_regular(path / "run.json"))["algorithm"]["knobs"]
            highs.update({k: float(v["high"]) for k, v in knobs.items() if isinstance(v, dict) and "high" in v})
        except Exception:  # an unreadable or older record: the bounds known before
            continue
    return highs


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
    knobs = knob_columns(trials)
    return trials[knobs].apply(lambda row: "|".join(f"{k}={float(row[k])!r}" for k in knobs), axis=1)


def _scores(trials: pd.DataFrame, ok: pd.Series) -> tuple[pd.DataFrame, pd.Series]:
    """Per grid point whose every seed is ``ok``: mean criterion and loss, best first; and each trial's point."""
    column, higher = criterion(trials)
    point = grid_points(trials)
    stable = ok.groupby(point).transform("all")
    scores = trials[stable].assign(_point=point[stable], _loss=trials["val_loss"].fillna(math.inf)).groupby(
        "_point").agg(score=(column, "mean"), loss=("_loss", "mean"))
    scores["key"] = scores["score"] if higher else -scores["score"]
    # best score, then lower loss, then (full ties) the first label
    return scores.reset_index().sort_values(["key", "loss", "_point"], ascending=[False, True, True]), point


def select(trials: pd.DataFrame) -> pd.DataFrame:
    """``trials`` of one cell with ``criterion`` and ``selected`` added: the trials (one per tuning
    seed) of the grid point with the best mean criterion over its seeds, among those that finished
    the full schedule. A point with a seed that diverged or failed is never selected: an LR that
    diverges on some seeds is not a safe choice."""
    if trials.empty:
        raise SelectionError("no finished trials to select from")
    column, _ = criterion(trials)
    out = trials.assign(criterion=column, selected=False)
    ok = (out["status"] == "completed") & out[column].notna()
    ranked, point = _scores(out, ok)
    if ranked.empty:
        return _last_to_diverge(out, point)
    out.loc[point == ranked.iloc[0]["_point"], "selected"] = True
    return out


def _last_to_diverge(trials: pd.DataFrame, point: pd.Series) -> pd.DataFrame:
    """When every grid point diverged (ECD at 4-bit QSGD, as in the paper), the cell's final runs still run
    so that the table can say it diverges: they take the point that trained longest before diverging (its
    slowest seed), the smallest learning rate among equals. ``attrs["all_diverged"]`` says so."""
    if not (trials["status"] == "diverged").any():
        raise SelectionError(f"none of the {len(trials)} trials finished the full schedule (failed or unfinished)")
    done = trials["epochs_done"].fillna(0.0) if "epochs_done" in trials else pd.Series(0.0, index=trials.index)
    lasted = done.groupby(point).min()
    lr = trials["lr"].groupby(point).first() if "lr" in trials else pd.Series(0.0, index=lasted.index)
    order = pd.DataFrame({"lasted": lasted, "lr": lr}).reset_index(names="_point")
    best = order.sort_values(["lasted", "lr", "_point"], ascending=[False, True, True]).iloc[0]["_point"]
    out = trials.copy()
    out.loc[point == best, "selected"] = True
    out.attrs["all_diverged"] = True
    return out


def _beyond(grid: list[float], chosen: float, ceiling: float | None) -> float | None:
    """One geometric step past the edge of ``grid`` that ``chosen`` sits on, or None (not at an edge,
    see _at_edge); never above the knob's ``ceiling`` (γ ≤ 1)."""
    if not _at_edge(pd.Series(grid), chosen, ceiling):
        return None
    low, high = (grid[0], grid[1]) if chosen == grid[0] else (grid[-2], grid[-1])
    if low <= 0 or high <= 0:
        return None
    step = high / low
    value = float(f"{(chosen / step if chosen == grid[0] else chosen * step):.3g}")  # a value one can write down
    return min(value, ceiling) if ceiling is not None else value


def rank(trials: pd.DataFrame, at: float) -> dict:
    """The grid points whose every seed trained soundly to at least ``at`` epochs, best first, and for the
    best one the knobs at an edge of the grid with the value one step beyond."""
    if trials.empty:
        raise SelectionError("no trials to rank")
    column, _ = criterion(trials)
    ok = trials["status"].isin(SOUND) & (trials["epochs_done"] >= at - 1e-9) & trials[column].notna()
    ranked, point = _scores(trials, ok)
    knobs = [k for k in knob_columns(trials) if trials[k].nunique(dropna=True) > 1]
    out = {"criterion": column, "at": at, "ranking": [], "edges": []}
    for r in ranked.to_dict("records"):
        members = trials[point == r["_point"]]
        out["ranking"].append({"point": r["_point"], "score": float(r["score"]), "trials": sorted(members["trial"]),
                               "values": {k: float(members[k].iloc[0]) for k in knobs}})
    if out["ranking"]:
        best = out["ranking"][0]["values"]
        for knob in knobs:
            grid = sorted(trials[knob].dropna().unique())
            value = _beyond(grid, best[knob], trials.attrs.get("knob_highs", KNOB_HIGHS_BEFORE).get(knob))
            if value is not None:
                out["edges"].append({"knob": knob, "value": float(best[knob]), "extend_to": float(value)})
    return out


def cmd_rank(args) -> int:
    cell_dir = Path(args.cell_dir)
    if not math.isfinite(args.at):
        raise SelectionError(f"--at {args.at}: not a finite number of epochs")
    if not cell_dir.is_dir():
        raise SelectionError(f"tuning directory not found: {cell_dir}")
    print(json.dumps(rank(read_trials(cell_dir), args.at)))
    return 0


def chosen_values(trials: pd.DataFrame, keys: list[str]) -> dict:
    """The selected trial's values of ``keys`` (the searched knobs), as plain numbers."""
    row = trials[trials["selected"]].iloc[0]
    return {k: float(row[k]) for k in keys if k in row and pd.notna(row[k])}


def cmd_select(args) -> int:
    cell_dir = Path(args.cell_dir)
    if not cell_dir.is_dir():
        raise SelectionError(f"tuning directory not found: {cell_dir}")
    trials = select(read_trials(cell_dir))
    knobs = knob_columns(trials)
    unknown = [k for k in args.keys or () if k not in knobs]
    if unknown:
        raise SelectionError(f"--keys: {unknown[0]!r} is not a knob of these trials; their knobs: {', '.join(knobs)}")
    keys = args.keys or [k for k in knobs if trials[k].nunique(dropna=True) > 1]
    values = chosen_values(trials, keys)
    chosen = trials[trials["selected"]]
    column = chosen["criterion"].iloc[0]
    score = chosen[column].mean()
    note = (f"# tuned on {len(trials)} trials of {cell_dir.name}: best mean {column} = {score:.4g} over "
            f"{len(chosen)} seed(s) ({', '.join(chosen['trial'])})\n")
    if trials.attrs.get("all_diverged"):
        note = (f"# every grid point of {cell_dir.name} diverged ({len(trials)} trials): the final runs take the one "
                f"that trained longest ({', '.join(chosen['trial'])}) and will most likely diverge too\n")
        print(f"analysis tune: warning: {note[2:].strip()}", file=sys.stderr)
    write_text_atomically(Path(args.out), note + yaml.safe_dump(values, sort_keys=True))
    print(f"{cell_dir.name}: {values} ({column} {score:.4g}) -> {args.out}")  # NaN when all diverged
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
    table = pd.concat(frames, ignore_index=True)
    return table[COLUMNS + sorted(c for c in table.columns if c not in COLUMNS)]  # a method's own knobs last


def _at_edge(values: pd.Series, chosen: float, high: float | None = None) -> bool:
    """Whether ``chosen`` is the smallest or largest of a grid of at least three values (then the
    optimum may lie outside the grid). Not an edge: zero at the bottom (no weight decay is a real
    choice) and the knob's largest value at the top (γ = 1)."""
    grid = sorted(values.dropna().unique())
    top = chosen == grid[-1] and not (high is not None and chosen >= high) if grid else False
    return len(grid) >= 3 and (top or (chosen == grid[0] and chosen != 0))


def _neighbours(g: pd.DataFrame, best: pd.Series, knobs: list[str], column: str) -> str:
    """The validation score of each grid neighbour of the selected point (one knob one grid step away, the
    others as selected), mean over its seeds, with the epochs it reached when halving stopped it earlier."""
    full = g["epochs"].max()
    parts = []
    for knob in knobs:
        grid = sorted(g[knob].dropna().unique())
        at = grid.index(best[knob]) if best[knob] in grid else None
        for j in ([] if at is None else [at - 1, at + 1]):
            if not 0 <= j < len(grid):
                continue
            same = g[knob] == grid[j]
            for other in knobs:
                if other != knob:
                    same &= g[other] == best[other]
            members = g[same]
            if members.empty:
                continue
            if (members["status"] == "diverged").any():
                parts.append(f"{knob} {grid[j]:g}: diverged")
                continue
            done = members["epochs_done"].min()
            budget = "" if done >= full - 1e-9 else f" ({done:g} ep)"
            parts.append(f"{knob} {grid[j]:g}: {members[column].mean():.4g}{budget}")
    return "; ".join(parts) or "—"


def _halving_note(study_dir: Path, cell: str) -> str:
    """Rungs (trials per rung) and any extension of the grid, from the cell's halving.json."""
    try:
        record = json.loads(read_regular(Path(study_dir) / "tune" / cell / "halving.json"))
    except (OSError, ValueError):
        return ""
    try:
        rungs = [r for r in record.get("rungs", []) if not r.get("extension")]
        text = " → ".join(f"{len(r['trials'])}@{r['epochs']:g}" for r in rungs)
        for edge in record.get("extended", []):
            text += f"; {edge['knob']} {edge['value']:g} at the grid's edge, extended to {edge['extend_to']:.3g}"
    except (AttributeError, KeyError, TypeError, ValueError):  # a damaged halving.json: the table says the count
        return ""
    return text


def read_tuned(study_dir: Path) -> pd.DataFrame | None:
    """STUDY_DIR/tuned.csv (``tune table`` writes it), checked: None when there is none; one its readers
    cannot use (a column missing, text where they read numbers) raises checks.DamagedFile naming it. Tables
    written before halving have no epochs_done: every trial ran its whole budget."""
    path = Path(study_dir) / "tuned.csv"
    if not path.is_file():
        return None
    criteria, made_by = {"val_acc", "val_ppl", "val_loss"}, f"python -m analysis tune table {study_dir}"
    try:
        table = read_table(path, [c for c in COLUMNS if c != "epochs_done"], made_by,
                           text=["status", "criterion"], filled=["cell", "status"],
                           numbers=[*TUNABLE, "epochs", "epochs_done", "val_fraction", *criteria],
                           flags=["selected"], choices={"criterion": criteria})
    except (OSError, ValueError) as err:  # not CSV at all: nothing to read the report's section from
        raise DamagedFile(f"{path} is not a CSV table ({err}); write it again with `{made_by}`, or remove it") from None
    if "epochs_done" not in table:
        table["epochs_done"] = table["epochs"]
    return table


def tuning_markdown(study_dir: Path) -> str | None:
    """The report's section: per cell, the selected values and their validation score on the full schedule,
    the scores of its grid neighbours (how flat the choice is), the halving's rungs and any extension of
    the grid, and how many trials ran and diverged; None when the study was not tuned."""
    table = read_tuned(study_dir)
    if table is None:
        return None
    rows = []
    for cell, g in table.groupby("cell", sort=True):
        best = g[g["selected"].astype(bool)]
        knobs = [k for k in knob_columns(g) if g[k].nunique(dropna=True) > 1]
        if len(best) and (best["status"] == "diverged").all():
            chosen = ", ".join(f"{k} = {best[k].iloc[0]:g}" for k in knobs) + " (every point diverged; the longest-lived)"
            score, near = "diverged", "all diverged"
        elif len(best):
            column = best["criterion"].iloc[0]
            chosen = ", ".join(f"{k} = {best[k].iloc[0]:g}" for k in knobs)
            score, near = f"{best[column].mean():.4g}", _neighbours(g, best.iloc[0], knobs, column)
        else:
            chosen, score, near = "nothing (all diverged)", "—", "—"
        rows.append(f"| {md_text(cell)} | {chosen} | {score} | {near} | {_halving_note(study_dir, cell) or len(g)} | "
                    f"{int((g['status'] == 'diverged').sum())} |")
    criterion = ", ".join(sorted(table["criterion"].dropna().unique())) or "—"
    head = (f"Each cell was tuned by successive halving on the training set minus a "
            f"{table['val_fraction'].median():g} validation split: every grid point trained a share of the "
            "schedule, the best third was continued from its checkpoint, and so on until the survivors finished "
            f"the full {table['epochs'].median():g} epochs; the best final {criterion} among those was selected "
            "(a point with a diverged seed never is), and the cell's final runs use it on the full training set. "
            "\"Neighbours\" are the grid points one step away along each knob, with the epochs they reached when "
            "halving stopped them earlier: a flat neighbourhood means the choice matters little. A winner at "
            "the edge of a grid of three or more values extends it by one value, once. Rungs: trials@epochs. "
            "All trials: `tuned.csv`.\n\n")
    return (head + f"| cell | selected | {criterion} | neighbours | rungs | diverged |\n|---|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def cmd_table(args) -> int:
    table = study_table(Path(args.study_dir))
    out = Path(args.study_dir) / "tuned.csv"
    write_text_atomically(out, table.to_csv(index=False))
    chosen = table[table["selected"]]
    print(f"{len(table)} trials of {table['cell'].nunique()} cells ({len(chosen)} selected) -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m analysis tune", description=__doc__.split("\n\n")[0])  # bad input: one line
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = sub.add_parser("select", help="the chosen values of one cell's trials, as YAML")
    p.add_argument("cell_dir")
    p.add_argument("--out", required=True)
    p.add_argument("--keys", nargs="+", help="knobs to write (default: those that vary); the trials' knobs: "
                   f"{', '.join(TUNABLE)} and any knob the trials' method declares tunable")
    p.set_defaults(run=cmd_select)
    p = sub.add_parser("rank", help="the grid points that reached --at epochs, best first (JSON)")
    p.add_argument("cell_dir")
    p.add_argument("--at", type=float, required=True, help="epochs every seed of a point must have trained")
    p.set_defaults(run=cmd_rank)
    p = sub.add_parser("table", help="STUDY_DIR/tuned.csv of every trial")
    p.add_argument("study_dir")
    p.set_defaults(run=cmd_table)
    try:
        args = parser.parse_args(argv)
        return args.run(args)
    except (SelectionError, UsageError) as err:
        print(f"analysis tune: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
