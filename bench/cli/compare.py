"""`bench compare`: a method against the baselines, as a study written and run by the pipeline."""
from __future__ import annotations

from .common import node_count, positive_float, positive_int

NAME = "compare"
HELP = ("your method against the baselines: writes a study to results/compare-NAME/study.yaml and runs the "
        "pipeline on it (report.html, report.md)")


def add_arguments(p) -> None:
    from ..pipeline.compare import add_arguments as compare_arguments  # no torch at import

    compare_arguments(p, positive_int, positive_float, node_count)


def run(args) -> int:
    from pathlib import Path

    from ..pipeline.compare import PREFIX, cmd_compare, default_name

    status = cmd_compare(args)
    # the report's first table (analysis writes it; bench reads the file, never imports analysis)
    ranking = Path("results") / (PREFIX + (args.name or default_name(list(dict.fromkeys(args.methods))))) / "ranking.md"
    if status == 0 and not args.dry_run and ranking.is_file():
        print("\n" + ranking.read_text(), flush=True)
    return status
