"""`bench status`: a study's runs done, running and left, with an ETA, from its folders (bench/pipeline/status.py)."""
from __future__ import annotations

from .common import positive_int

NAME = "status"
HELP = ("a study's runs done, running and left, and an ETA, read from results/<study>/runs and logs/<study>: "
        "once, or every --watch seconds until none is left (`make reproduce` prints it itself)")


def add_arguments(p) -> None:
    p.add_argument("--configfile", action="append", required=True, metavar="FILE",
                   help="the study's YAML (repeat to merge several, as snakemake does)")
    p.add_argument("--scale", default=None, help="cpu | gpu (default: the study file's, else cpu)")
    p.add_argument("--cores", type=positive_int, default=1, help="runs at a time, for the ETA (default 1)")
    p.add_argument("--watch", type=positive_int, default=None, metavar="SECONDS",
                   help="look again every SECONDS until no run is left or running")


def run(args) -> int:
    import time
    from pathlib import Path

    from ..pipeline import Study
    from ..pipeline.status import Watch, study_status
    from ..plan.command import load_study

    study = Study(load_study(args.configfile, args.scale))
    where = (Path("results") / study.name, Path("logs") / study.name / "runs", args.cores)
    if args.watch is None:
        print(study_status(study, *where).line())
        return 0
    watch = Watch(study, *where, every=args.watch)
    watch.show(watch.sample())
    while (status := watch.sample()).running + status.left:
        time.sleep(args.watch)
        watch.show(status)
    watch.show(status, last=True)
    return 0
