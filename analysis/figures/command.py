"""``python -m analysis figures DIR [--only NAME ... | --all --out FOLDER]``: draws the study's figures (those its
DIR/figures/index.json already holds: the pipeline's; every figure the runs support where there is none yet, or
with ``--all`` into another folder, ``--out``, since the study's report shows every figure of its index) and merges
their captions into the index; a figure named with ``--only`` that cannot be drawn is an error (exit status 1, the
reason on stderr). ``--partial``, while a study runs: every figure the runs finished so far support, drawn into
DIR-partial/figures beside the study (or ``--out``), never into the study's folder, which its pipeline writes.
Bad input is one line, exit status 2."""
from __future__ import annotations

import sys
from pathlib import Path

from analysis.argparsing import Parser
from analysis.errors import UsageError
from analysis.figures.base import catalog
from analysis.figures.index import check_index_lock, read_index, update_index
from analysis.summary import load_tables


def main(argv: list[str] | None = None) -> int:
    names = list(catalog())  # complete: importing this module imported its package, and so every figure
    p = Parser(prog="python -m analysis figures", description="Draw every figure DIR's data support.")
    p.add_argument("dir", type=Path, help="a study's results directory (runs/, summary.csv, consensus/)")
    p.add_argument("--only", nargs="+", choices=names, metavar="NAME", help=f"draw only these: {', '.join(names)}")
    p.add_argument("--all", action="store_true", help="every figure the runs support, not only the study's")
    p.add_argument("--out", type=Path, help="draw into this folder, not DIR/figures (for figures the study's "
                   "report is not to show)")
    p.add_argument("--partial", action="store_true", help="from the runs finished so far, while the study runs: "
                   "every figure they support, into DIR-partial/figures (or --out), never into the study's folder")
    try:
        args = p.parse_args(argv)
    except UsageError as err:  # one line, not argparse's usage and the error
        print(f"analysis figures: error: {err}", file=sys.stderr)
        return 2
    if not args.dir.is_dir():
        print(f"error: results directory not found: {args.dir}", file=sys.stderr)
        return 2
    if args.partial:  # the study's folder is the pipeline's to write, at the end: every figure, beside it
        args.all, args.out = True, args.out or args.dir.parent / f"{args.dir.resolve().name}-partial" / "figures"
        if (args.out.parent / "runs").exists():
            raise UsageError(f"--partial would draw into the study {args.out.parent}; give --out FOLDER")
    fig_dir = args.out or args.dir / "figures"
    # refused before any figure is drawn: a link where the lock goes, a damaged index (merged into, not lost)
    check_index_lock(fig_dir)
    studys = [name for name in read_index(fig_dir) if name in catalog()]
    if args.all and studys and fig_dir.resolve() == (args.dir / "figures").resolve():
        raise UsageError(f"--all would add figures to the study's own ({', '.join(studys)}: {fig_dir / 'index.json'}"
                         "), which its report shows; give --out DIR to draw them there")
    fig_dir.mkdir(parents=True, exist_ok=True)
    return _draw(args, fig_dir, None if args.all or args.only else studys or None)


def _draw(args, fig_dir: Path, studys: list[str] | None) -> int:
    """Draw --only's figures, else the study's (``studys``: the index's, when it has some), else every one: a
    figure nobody asked for would reach the next report."""
    points, summary, note = load_tables(args.dir)
    if args.partial:
        print(f"drawing from the {0 if points is None else points['run_id'].nunique()} runs finished so far")
    figures = catalog()
    wanted = args.only or studys or list(figures)
    if studys:
        print(f"drawing the study's {len(studys)} figures (those of {fig_dir / 'index.json'}); --all for every one")
    drawn: dict[str, str] = {}
    missed = []
    for name in wanted:
        result = figures[name].draw(args.dir, points, summary, fig_dir / name)
        if isinstance(result, str):
            why = result + (f" ({note})" if note and figures[name].reads_runs else "")
            print(f"skipped {name}: {why}")
            missed.append(f"{name}: {why}")
            continue
        paths, drawn[name] = result
        for path in paths:
            print(f"wrote {path}")
    print(f"wrote {update_index(fig_dir, drawn, set(wanted))}")
    if args.only and missed:  # asked for by name (a pipeline job): not drawing it is the job's failure, said here
        for line in missed:
            print(f"error: figure {line}", file=sys.stderr)
        return 1
    return 0
