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
    from ..pipeline.compare import cmd_compare

    return cmd_compare(args)
