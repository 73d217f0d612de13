"""`bench bisect`: the commit that introduced a step in a tracked quantity, by `bench track` probes
(bench/track/bisection.py)."""
from __future__ import annotations

NAME = "bisect"
HELP = "the commit between GOOD and BAD that introduced a step in a tracked quantity (docs/tracking.md)"


def add_arguments(p) -> None:
    from ..track import bisection  # no torch, no analysis at import

    p.description = bisection.__doc__.split("\n\n")[0]
    bisection.add_arguments(p)


def run(args) -> int:
    from ..track.bisection import cmd_bisect

    return cmd_bisect(args)
