"""Command line of the analysis package: ``python -m analysis summarize|baseline|regress|claims|figures|report|tune|
history|browse|docs``.
Exit 0 on success, 1 when regressions were found, 2 on bad input (one line on stderr)."""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from pathlib import Path

import pandas as pd

from analysis.argparsing import Parser
from analysis.busy import busy_note
from analysis.claims import MIN_SEEDS, check_claims, claims_markdown, read_traces, write_claims
from analysis.errors import DamagedFile, UsageError, one_line
from analysis.files import read_regular, write_atomically, write_text_atomically
from analysis.load import load_runs
from analysis.regress import (DEFAULT_TOLERANCES, baseline_problem, compare, compare_perf, make_baseline,
                              perf_problem)
from analysis.summary import DEFAULT_TARGET_REL, cell_summary, read_summary, study_target, summarize

# sub-commands with their own parser and main(argv)
DELEGATED = {"figures": "analysis.figures.command", "report": "analysis.report", "tune": "analysis.tuning",
             "history": "analysis.history", "browse": "analysis.browse.cli",
             "docs": "analysis.docs"}
# their lines in `python -m analysis --help` (each has its own --help for the options)
DELEGATED_HELP = {"figures": "draw the study's figures: DIR/figures/*.png, *.pdf and index.json",
                  "report": "write DIR/report.md and report.html: tables, the paper's claims, figures",
                  "tune": "hyper-parameters from a study's tuning trials: select, rank, or tabulate them",
                  "history": "the suite's speed and results over its commits, from bench track's records",
                  "browse": "DIR/browser.html: one offline page to filter, group and overlay the runs (or a history)",
                  "docs": "the tables and figures of README.md and docs/results.md, from committed study tables"}


def _number(kind, low=None):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or (low is not None and value <= low):
            raise argparse.ArgumentTypeError(f"{text!r} must be finite and > {low}")
        return value
    return parse


_NOTES: list[str] = []  # the runs left out, said once the command has succeeded (a refusal is one line)


def _load(directory: str):
    path = Path(directory)
    if not path.is_dir():
        raise UsageError(f"results directory not found: {directory}")
    runs = load_runs(path)
    _NOTES.extend(f"analysis: note: {where}: {reason}" for where, reason in runs.problems)
    if not len(runs):
        skipped = ""
        if runs.problems:
            where, reason = runs.problems[0]
            skipped = f"; {len(runs.problems)} left out, e.g. {where}: {(str(reason).splitlines() or [''])[0]}"
        raise UsageError(f"no readable runs (directories with run.json and metrics.parquet) under {directory}"
                         f"{skipped}")
    return runs


def _targets(args) -> dict:
    if args.target_acc is not None and args.target_rel is not None:
        raise UsageError("give --target-acc or --target-rel, not both")
    return {"target_acc": args.target_acc, "target_rel": args.target_rel, "metric": args.metric}


def _summarize(runs, **kw):
    try:
        return summarize(runs, **kw)
    except ValueError as err:  # an unknown metric, or two targets
        raise UsageError(str(err)) from None


def _targets_or_the_studys(args) -> tuple[dict, str]:
    """The targets given, else the study's own (study_target): a command run by hand never writes NaN targets."""
    targets = _targets(args)
    if targets["target_acc"] is not None or targets["target_rel"] is not None:
        return targets, "given"
    rule, source = study_target(args.dir)
    return {**targets, **rule}, source


def _same_rule(given: dict, stored: dict) -> bool:
    if given["target_rel"] is not None:
        return stored.get("target_rel") is not None and math.isclose(given["target_rel"], stored["target_rel"])
    values = (stored.get("target_acc") or {}).values()
    return bool(values) and all(math.isclose(given["target_acc"], v) for v in values)


def _target_option(given: dict) -> str:
    return (f"--target-rel {given['target_rel']:g}" if given["target_rel"] is not None
            else f"--target-acc {given['target_acc']:g}")


def _keep_the_studys_summary(directory: str, given: dict, source: str) -> None:
    """A target or metric other than DIR/summary.csv's would replace the pipeline's table, which its figures,
    report and claims read and Snakemake takes for up to date: refused, one line naming the setting."""
    path = Path(directory) / "summary.csv"
    try:
        rule, stored = study_target(directory)
        metrics = set(read_summary(path)["metric"].dropna().astype(str)) if path.is_file() else set()
    except (OSError, ValueError, DamagedFile):  # a table no reader can use: summarize mends it, whatever its settings
        return
    if not metrics or stored == "the pipeline's default":  # none, or no rule in it to keep
        return
    setting = None if source != "given" or _same_rule(given, rule) else _target_option(given)
    if metrics != {given["metric"]}:
        setting = f"--metric {given['metric']}"
    if setting:
        kept = (f"{rule['target_rel']:g} x best all-reduce" if "target_rel" in rule else "an absolute target")
        raise UsageError(f"{path} was written with target {kept} on {', '.join(sorted(metrics))}; {setting} would "
                         "replace it under the study's figures and report: remove it first to summarize otherwise")


def cmd_summarize(args) -> int:
    runs = _load(args.dir)
    targets, source = _targets_or_the_studys(args)
    _keep_the_studys_summary(args.dir, targets, source)
    table = _summarize(runs, **targets)
    cells = cell_summary(table)
    out = Path(args.dir)
    write_atomically(out / "summary.csv", lambda tmp: table.to_csv(tmp, index=False))
    write_atomically(out / "summary.parquet", lambda tmp: table.to_parquet(tmp, index=False))
    write_atomically(out / "cells.csv", lambda tmp: cells.to_csv(tmp, index=False))
    tidy = runs.tidy()  # the study in one table: pd.read_parquet("results/<study>/points.parquet")
    write_atomically(out / "points.parquet", lambda tmp: tidy.to_parquet(tmp, index=False))
    rule = (f"{targets['target_rel']:g} x best all-reduce" if targets["target_rel"] is not None
            else "as given per task" if isinstance(targets["target_acc"], dict) else f"{targets['target_acc']:g}")
    print(f"{len(table)} runs in {len(cells)} cells -> {out / 'summary.csv'}, {out / 'cells.csv'}; "
          f"{len(tidy)} evaluation points -> {out / 'points.parquet'}; target {rule} ({source})")
    busy = busy_note(table)
    if busy:
        _NOTES.append(f"analysis: warning: {busy}")
    return 0


def cmd_baseline(args) -> int:
    runs = _load(args.dir)
    table = _summarize(runs, **_targets_or_the_studys(args)[0])
    tol = {"acc_tol": args.acc_tol, "rel_tol": args.rel_tol}
    baseline = make_baseline(table, cell_summary(table), {k: v for k, v in tol.items() if v is not None})
    baseline["claims"] = dict(zip(*check_claims(table, read_traces(Path(args.dir)))[["claim", "verdict"]].T.values))
    out = Path(args.out)
    write_text_atomically(out, json.dumps(baseline, indent=1, sort_keys=True) + "\n")
    print(f"baseline of {len(baseline['cells'])} cells -> {out}")
    return 0


def _read_json(path: str):
    try:
        return json.loads(read_regular(path))
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read JSON file {path}: {err}") from None


def _usable(path: str, why: str | None, kind: str) -> None:
    if why:
        raise UsageError(f"{path} is not a usable {kind}: {why}")


def cmd_regress(args) -> int:
    baseline = _read_json(args.baseline)
    current_is_file = Path(args.current).is_file()
    is_perf = isinstance(baseline, dict) and "figures" in baseline
    if is_perf or current_is_file:
        current = _read_json(args.current) if current_is_file else None
        if not (is_perf and isinstance(current, dict) and "figures" in current):
            raise UsageError(f"--baseline {args.baseline} and --current {args.current} must both be perf "
                             "JSON files (with a 'figures' key), or a baseline JSON and a results directory")
        _usable(args.baseline, perf_problem(baseline), "perf file")
        _usable(args.current, perf_problem(current), "perf file")
        kw = {} if args.rel_tol is None else {"rel_tol": args.rel_tol}
        table, regressions = compare_perf(baseline, current, **kw)
    else:
        _usable(args.baseline, baseline_problem(baseline), "baseline")
        runs = _load(args.current)
        # the baseline's absolute targets, so a change in all-reduce accuracy cannot move the goalposts
        current = _summarize(runs, target_acc=baseline.get("targets") or None,
                            metric=baseline.get("metric", "test_acc"))
        tol = {k: v for k, v in {"acc_tol": args.acc_tol, "rel_tol": args.rel_tol}.items() if v is not None}
        table, regressions = compare(baseline, current, tol,
                                     claims=check_claims(current, read_traces(Path(args.current))))
    with pd.option_context("display.width", 200, "display.max_rows", None, "display.max_colwidth", 80):
        print(table.to_string(index=False) if len(table) else "(nothing to compare)")
    for line in regressions:
        print(f"REGRESSION {line}", file=sys.stderr)
    return 1 if regressions else 0


def cmd_claims(args) -> int:
    """On DIR/summary.csv (the study's own targets) unless a target is given here."""
    runs = _load(args.dir)
    targets = _targets(args)
    given = targets["target_acc"] is not None or targets["target_rel"] is not None
    other = (f"--min-seeds {args.min_seeds}" if args.min_seeds != MIN_SEEDS else None if not given
             or _same_rule(targets, study_target(args.dir)[0]) else _target_option(targets))
    if other and (Path(args.dir) / "claims.csv").is_file():  # the report's (the pipeline's): its settings kept
        raise UsageError(f"{Path(args.dir) / 'claims.csv'} holds the study's verdicts (--min-seeds {MIN_SEEDS}, "
                         f"summary.csv's target); {other} would replace them: remove it first to check otherwise")
    stored = Path(args.dir) / "summary.csv"
    summary = None
    if targets["target_acc"] is None and targets["target_rel"] is None and stored.is_file():
        try:  # a table without the summary's columns or types is refused (DamagedFile): its targets were chosen
            summary = read_summary(stored)
        except (OSError, ValueError):  # not CSV at all: no targets in it to keep, so computed again
            summary = None
    if summary is None:
        summary = _summarize(runs, **{**targets, "target_rel": targets["target_rel"] or DEFAULT_TARGET_REL})
    table = check_claims(summary, read_traces(Path(args.dir)), min_seeds=args.min_seeds)
    out = write_claims(args.dir, table)
    print(claims_markdown(table, args.min_seeds) + f"\n-> {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    invoked = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    parser = Parser(prog="choco-analysis" if invoked == "choco-analysis" else "python -m analysis", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    def target_options(p):
        p.add_argument("--target-acc", type=_number(float, 0.0), help="absolute target of the metric")
        p.add_argument("--target-rel", type=_number(float, 0.0),
                       help="target = R x best all-reduce value of the same task and data")
        p.add_argument("--metric", default="test_acc", help="metric column the target is read on")

    p = sub.add_parser("summarize", help="DIR/summary.csv, summary.parquet, cells.csv and points.parquet")
    p.add_argument("dir")
    target_options(p)
    p.set_defaults(run=cmd_summarize)

    p = sub.add_parser("baseline", help="store a results set as a JSON baseline")
    p.add_argument("dir")
    p.add_argument("--out", required=True)
    target_options(p)
    p.add_argument("--acc-tol", type=_number(float, 0.0), help=f"default {DEFAULT_TOLERANCES['acc_tol']}")
    p.add_argument("--rel-tol", type=_number(float, 0.0), help=f"default {DEFAULT_TOLERANCES['rel_tol']}")
    p.set_defaults(run=cmd_baseline)

    p = sub.add_parser("regress", help="compare results (or a perf JSON) with a baseline; exit 1 on regression")
    p.add_argument("--baseline", required=True)
    p.add_argument("--current", required=True, help="results directory, or perf JSON file")
    p.add_argument("--acc-tol", type=_number(float, 0.0))
    p.add_argument("--rel-tol", type=_number(float, 0.0), help="default 0.10 for runs, 0.15 for perf")
    p.set_defaults(run=cmd_regress)

    p = sub.add_parser("claims", help="the paper's claims checked on a study's results: DIR/claims.csv")
    p.add_argument("dir")
    target_options(p)
    p.add_argument("--min-seeds", type=_number(int, 1), default=MIN_SEEDS,
                   help=f"seeds each cell a claim needs before it decides (default {MIN_SEEDS}, as the paper's "
                        "mean of 3 runs; at least 2)")
    p.set_defaults(run=cmd_claims)
    for name in DELEGATED:
        sub.add_parser(name, help=DELEGATED_HELP[name])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        try:
            entry = importlib.import_module(DELEGATED[argv[0]]).main
        except (ImportError, AttributeError) as err:
            print(f"analysis: `{argv[0]}` is not available ({DELEGATED[argv[0]]}.main: {err})", file=sys.stderr)
            return 2
        return one_line("analysis", lambda: int(entry(argv[1:]) or 0))

    def with_notes() -> int:
        args = build_parser().parse_args(argv)
        _NOTES.clear()
        status = args.run(args)
        for line in _NOTES:
            print(line, file=sys.stderr)
        return status

    return one_line("analysis", with_notes)
