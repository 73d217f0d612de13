"""The command `python -m analysis history DIR...`: its arguments (build_parser), the run from records to
outputs (run: filtering by kind, pattern, dirtiness and busy machines, settings groups, ordering, the gate's
refusals, analysing, the confirmation of timing regressions, the gate's failures, then writing history.csv,
steps.csv, newest.csv, noise.csv, the figures and history.md, and the summary lines on stdout and stderr),
and main with the exit status: 0, 1 when the newest commit starts a confirmed regression or failed
(gate.py), 2 on bad input or a refused check (one line). The noisy-machine safeguards are safeguards.py's."""
from __future__ import annotations

import argparse
import fnmatch
import math
import sys
from pathlib import Path

import pandas as pd

from analysis.argparsing import Parser
from analysis.errors import UsageError, one_line
from analysis.files import write_atomically, write_text_atomically
from analysis.history.compare import compare, lines, point_of
from analysis.history.changepoint import ALPHA, MIN_SIDE, WINDOW, analyse
from analysis.history.definitions import with_definitions
from analysis.history.figures import _safe, draw
from analysis.history.gate import (check_expect_value, commit_of, expect_refusal, failed_newest, later_than,
                                   newest_failures, not_compared, nothing_compared)
from analysis.history.order import ORDERS, order_points
from analysis.history.report import _markdown, _noise_line
from analysis.history.records import (_NOTES, KINDS, TOLERANCES, _parse_date, load_records, observations, record_row,
                                      series_of)
from analysis.history.safeguards import add_arguments as add_safeguards, confirm, leave_out_busy, unconfirmed_lines
from analysis.history.settings import settings_note, split_by_settings


def _tolerance_override(text: str) -> tuple[str, float]:
    kind, eq, value = text.partition("=")
    if not eq or kind not in KINDS:
        raise argparse.ArgumentTypeError(f"{text!r} is not KIND=VALUE with KIND one of {', '.join(KINDS)}")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number") from None
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: the tolerance must be finite and > 0")
    return kind, number


def _between(kind, low, high=None):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (low <= value and (high is None or value <= high)) or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text!r} must be >= {low}" + (f" and <= {high}" if high else ""))
        return value
    return parse


COMMITTED = Path("results") / "history"  # the suite's committed records: a report never lands among them


def default_out(first: Path) -> Path:
    """Where the report goes without --out: beside the first DIR, except inside the committed history
    (results/history of the working folder), whose reports go to results/history-report/ instead."""
    first = Path(first)
    committed = COMMITTED.resolve()
    here = first.resolve()
    if here == committed or here.is_relative_to(committed):
        return COMMITTED.parent / "history-report" / here.relative_to(committed)
    return first.parent / f"{here.name}.report"


def build_parser() -> argparse.ArgumentParser:
    # the package's docstring describes the command (the package is loaded before this module, always)
    history = sys.modules[__package__]
    p = Parser(prog="python -m analysis history", description=history.__doc__.split("\n\n")[0],
               epilog="Tolerances: " + ", ".join(f"{k} {'%d%%' % (v * 100) if m == 'rel' else v}"
                                                  for k, (m, v) in TOLERANCES.items()) + " (docs/tracking.md).")
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="results/history/<machine>, or results/history for every machine")
    p.add_argument("--out", default=None, help="figures and tables (default: DIR.report beside the first DIR; "
                   "results/history-report/NAME for the committed results/history)")
    p.add_argument("--kinds", default=None,
                   help=f"comma list of the kinds to analyse: {', '.join(KINDS)} (default: all)")
    p.add_argument("--only", default=None, metavar="GLOBS", help="comma list of quantity patterns, e.g. 'perf.b.*'")
    p.add_argument("--tol", action="append", type=_tolerance_override, default=[], metavar="KIND=VALUE",
                   help="a tolerance in place of the default, repeatable: e.g. ratio=0.5 (50%%), accuracy=0.03")
    p.add_argument("--alpha", type=_between(float, 1e-12, 0.5), default=ALPHA, help=f"test level (default {ALPHA})")
    p.add_argument("--min-side", type=_between(int, 1), default=MIN_SIDE,
                   help=f"commits a step needs on each side (default {MIN_SIDE})")
    p.add_argument("--window", type=_between(int, 1), default=WINDOW,
                   help=f"earlier commits the newest one is compared with, since the last step (default {WINDOW})")
    p.add_argument("--order", choices=ORDERS, default="graph",
                   help="commit order: graph (default: git rev-list --topo-order of the measured commits in --repo; "
                   "committer dates, said on stderr, when --repo holds none of them), git (the first-parent chain "
                   "of HEAD in --repo) or date (committer dates, which a skewed clock reorders)")
    p.add_argument("--repo", default=None, help="the repository of the commits (default: the working folder)")
    p.add_argument("--clean-only", action="store_true", help="leave out records of dirty trees")
    add_safeguards(p)
    p.add_argument("--compare", nargs=2, default=None, metavar=("A", "B"),
                   help="every quantity measured at both commits A and B side by side (as asv compare): "
                   "compare.csv and a table; exit 0")
    p.add_argument("--no-figures", action="store_true", help="tables only")
    p.add_argument("--expect", default=None, metavar="REV",
                   help="refuse (exit 2) unless REV (a commit of --repo, e.g. HEAD) is the newest commit read, has "
                   "values left after --clean-only, --max-load, --kinds and --only, and has at least one quantity "
                   "with an earlier commit of the same settings, so that a check which measured or compared "
                   "nothing of REV fails instead of passing (CI)")
    return p


def run(args) -> int:
    dirs = [Path(d) for d in args.dirs]
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"history directory not found: {d}")
    check_expect_value(args.expect)
    if args.compare and args.expect is not None:
        raise UsageError("--compare and --expect: one at a time (--expect checks the newest commit)")
    kinds = set(KINDS)
    if args.kinds:
        kinds = {k.strip() for k in args.kinds.split(",") if k.strip()}
        if not kinds or kinds - set(KINDS):
            raise UsageError(f"--kinds {args.kinds!r}: allowed: {', '.join(KINDS)}")
    tolerances = dict(TOLERANCES)
    for kind, value in args.tol:
        tolerances[kind] = (TOLERANCES[kind][0], value)
    overridden = frozenset(kind for kind, _ in args.tol)
    records, skipped = load_records(dirs)
    _NOTES.extend(f"analysis history: note: {s.path}: {s.reason} (left out)" for s in skipped)
    if args.clean_only:
        records = [r for r in records if not r.get("dirty")]
    if not records:
        why = f"; {len(skipped)} left out, e.g. {skipped[0].path}: {skipped[0].reason}" if skipped else ""
        raise UsageError(f"no{' clean' if args.clean_only else ''} bench track records (<machine>/<commit>/<time>.json) "
                         f"under {', '.join(map(str, dirs))}{why}")
    table, notes = with_definitions(observations(records), args.repo)  # a redefinition: a series of its own
    _NOTES.extend(notes)
    table = split_by_settings(table)
    globs = [g.strip() for g in (args.only or "").split(",") if g.strip()]

    def selected(quantity: str, kind: str, name: str | None = None) -> bool:
        return kind in kinds and (not globs or any(fnmatch.fnmatchcase(q, g) for q in {quantity, name or quantity}
                                                   for g in globs))
    table = table[pd.Series([selected(q, k, n) for q, k, n in zip(table["quantity"], table["kind"], table["name"])],
                            index=table.index, dtype=bool)]
    _NOTES.extend(settings_note(table))
    measured = table  # what the records hold, before the busy ones go: a figure left out for load is not missing
    table, notes = leave_out_busy(table, args)
    _NOTES.extend(notes)
    every = pd.DataFrame([record_row(r) for r in records])  # the commit order is that of every record read
    ordered, foreign = order_points(every, args.order, args.repo)
    failed = failed_newest(ordered, records, set(table["point"]))
    if table.empty and not failed:
        raise UsageError(f"no tracked values left after --kinds/--only in {len(records)} records")
    points = [p for p in ordered if p in set(table["point"]) and (args.compare or p not in foreign)]
    points += [failed] if failed and not args.compare else []
    if not points:
        raise UsageError("no records left in commit order (see --order)")
    commit_of_point = every.groupby("point")["commit"].first().to_dict()
    if args.expect is not None:
        expected = commit_of(args.expect.strip(), args.repo)
        why = expect_refusal(args.expect, expected, points, commit_of_point, records, skipped,
                             ", ".join(map(str, dirs)), args.clean_only)
        if why:
            raise UsageError(why)
    table = table[table["point"].isin(points)]
    first = every.groupby("point").first()
    info = {p: {"describe": first.loc[p, "describe"], "subject": first.loc[p, "subject"]} for p in points}
    series = series_of(table, points)
    if args.compare:
        return _compare(args, series, points, tolerances, overridden, dirs)
    steps, newest, noise = analyse(series, points, info, tolerances, args.alpha, args.min_side, args.window, overridden)
    newest = confirm(newest, series, points[-1], args.confirm)
    if args.expect is not None and (why := nothing_compared(args.expect, newest)):
        raise UsageError(why)
    is_later = later_than(commit_of_point[points[-1]], _parse_date(first.loc[points[-1], "commit_date"]), args.repo,
                          args.order != "date")
    failures = newest_failures(points, records, skipped, measured[measured["point"].isin(points)],
                               selected, is_later, args.clean_only)
    out = Path(args.out) if args.out else default_out(dirs[0])
    rank = {p: i for i, p in enumerate(points)}
    tidy = table.assign(order=table["point"].map(rank)).sort_values(["quantity", "order", "sample"])
    write_atomically(out / "history.csv", lambda tmp: tidy.drop(columns=["bound", "name"]).to_csv(tmp, index=False))
    write_atomically(out / "steps.csv", lambda tmp: steps.to_csv(tmp, index=False))
    write_atomically(out / "newest.csv", lambda tmp: newest.to_csv(tmp, index=False))
    write_atomically(out / "noise.csv", lambda tmp: noise.to_csv(tmp, index=False))
    drawn = []
    if not args.no_figures:
        labels = {p: (info[p]["describe"] if len(info[p]["describe"]) <= 24 else p[:7]) for p in points}
        by_quantity = {r["quantity"]: r for r in newest.to_dict("records")}
        for quantity, s in series.items():
            drawn.append(draw(quantity, s, steps, by_quantity.get(quantity), labels,
                              out / "figures" / f"{_safe(quantity)}.png"))
    machines = sorted(table["machine"].unique())
    regressions = newest[newest["verdict"] == "regression"]
    verdicts = ", ".join(f"{n} {v}" for v, n in newest["verdict"].value_counts().items()) + not_compared(foreign,
                                                                                                         records)
    write_text_atomically(out / "history.md", _markdown(records, points, info, machines, series, steps, verdicts,
                                                         newest, noise, tolerances, args, drawn, failures))
    print(f"history: {len(records)} records, {len(points)} commits ({info[points[0]]['describe']} .. "
          f"{info[points[-1]]['describe']}), {len(machines)} machine{'s' * (len(machines) != 1)}, "
          f"{len(series)} quantities -> {out}/")
    with pd.option_context("display.width", 200, "display.max_rows", None, "display.max_colwidth", 50):
        if len(steps):
            cols = ["quantity", "first_commit", "describe", "change", "p_adj", "verdict"]
            print(f"steps ({len(steps)}):\n" + steps[cols].to_string(index=False))
        else:
            print("steps: none detected")
    print(f"newest commit {info[points[-1]]['describe']}: {verdicts}"
          + (f"; FAILED in {len(failures)} ways (stderr)" if failures else ""))
    print(_noise_line(noise, tolerances))
    for _, r in regressions.iterrows():
        size = f"{r['change']:+.1%}" if r["mode"] == "rel" else f"{r['change']:+.4g}"
        tol = f"{r['tolerance']:.0%}" if r["mode"] == "rel" else f"{r['tolerance']:g}"
        print(f"REGRESSION {r['quantity']}: {r['before_median']:.4g} -> {r['newest_median']:.4g} ({size}, tolerance "
              f"{tol}; {r['test']}) at {info[points[-1]]['describe']}", file=sys.stderr)
    for line in unconfirmed_lines(newest, info[points[-1]]["describe"], args.confirm):
        print(line, file=sys.stderr)
    for line in failures:
        print(f"FAILED {info[points[-1]]['describe']}: {line}", file=sys.stderr)
    return 1 if len(regressions) or failures else 0


def _compare(args, series, points, tolerances, overridden, dirs) -> int:
    a, b = (point_of(commit_of(rev.strip(), args.repo, "--compare"), rev, points) for rev in args.compare)
    table = compare(series, a, b, tolerances, args.alpha, overridden)
    out = Path(args.out) if args.out else default_out(dirs[0])
    write_atomically(out / "compare.csv", lambda tmp: table.to_csv(tmp, index=False))
    print("\n".join(lines(table, *args.compare)))
    print(f"compare: -> {out / 'compare.csv'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _NOTES.clear()

    def with_notes() -> int:
        status = run(build_parser().parse_args(argv))
        for line in _NOTES:
            print(line, file=sys.stderr)
        return status

    return one_line("analysis history", with_notes, (UsageError,))

