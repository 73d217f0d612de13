"""The command `python -m analysis browse DIR [--out FILE]`: a study folder (summary.csv), a results folder of
studies, or a history folder of `bench track` records, to one HTML page. Exit 0, or 2 on bad input (one line)."""
from __future__ import annotations

import sys
from pathlib import Path

from analysis.argparsing import Parser
from analysis.errors import UsageError, one_line
from analysis.files import write_text_atomically


def build_parser() -> Parser:
    p = Parser(prog="python -m analysis browse", description=sys.modules[__package__].__doc__)
    p.add_argument("dir", metavar="DIR", help="results/<study>, results/ (every study in it) or results/history")
    p.add_argument("--repo", default=None, help="for a history: the repository of its commits, which tells the "
                   "definition each commit had of a redefined quantity (default: the working folder)")
    p.add_argument("--out", default=None, help="the page (default: DIR/browser.html; for a history, the folder "
                   "its report goes to, e.g. results/history-report/browser.html)")
    return p


def run(args) -> int:
    root = Path(args.dir)
    if not root.is_dir():
        raise UsageError(f"results directory not found: {args.dir}")
    from analysis.browse import history, study  # after the check: plotly is only needed for a page
    if study.find_studies(root) or not history.has_records(root):
        text, count = study.build(root)
        out, noun = Path(args.out) if args.out else root / "browser.html", "runs"
    else:
        text, count = history.build(root, args.repo)
        out, noun = Path(args.out) if args.out else history.default_page(root), "quantities"
    write_text_atomically(out, text)
    print(f"browser: {count} {noun} -> {out} ({len(text.encode()) / 1e6:.1f} MB, plotly.js inlined: opens offline)")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return one_line("analysis browse", lambda: run(build_parser().parse_args(argv)))
