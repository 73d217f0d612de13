"""`bench track`: the quick set of one commit appended to this machine's history (bench/track)."""
from __future__ import annotations

from .common import device, output_dir, positive_float

NAME = "track"
HELP = ("the quick set (perf --quick and config/track.yaml) of one commit, appended to "
        "results/history/<machine>/<commit>/ (docs/tracking.md)")


def add_arguments(p) -> None:
    from ..track import add_arguments as track_arguments  # no torch at import

    track_arguments(p, output_dir, positive_float, device())


def run(args) -> int:
    from ..track import cmd_track

    return cmd_track(args)
