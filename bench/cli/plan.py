"""`bench plan`: every job of a study timed on synthetic data (bench/plan; docs/plan.md)."""
from __future__ import annotations

import argparse

from .common import device, non_negative_int, positive_int

NAME = "plan"
HELP = ("every job of a study timed on synthetic data: results/<study>/plan.csv, steps and GPU-hours per job, "
        "shape and rule")


def _safety(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 1:
        raise argparse.ArgumentTypeError(f"{text} must be >= 1 (a factor on the planned time)")
    return value


def _vectorize(text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise argparse.ArgumentTypeError(f"{text!r}; allowed: true, false")


def add_arguments(p) -> None:
    p.add_argument("--configfile", action="append", required=True, metavar="FILE",
                   help="the study's YAML (repeat to merge several, as snakemake does)")
    p.add_argument("--scale", default=None, help="cpu | gpu (default: the study file's, else cpu)")
    p.add_argument("--steps", type=positive_int, default=3, help="timed training steps per shape (median; default 3)")
    p.add_argument("--warmup", type=non_negative_int, default=1, help="untimed steps first (default 1)")
    p.add_argument("--device", type=device("auto"), default="auto",
                   help="auto (cuda when a GPU is here, else cpu) | cpu | cuda")
    p.add_argument("--safety", type=_safety, default=None,
                   help="runtime asked of SLURM = planned time x this (default: the study's plan_safety, 1.5)")
    p.add_argument("--max-workers", type=positive_int, default=None,
                   help="time at most this many workers and scale s/step by n (an extrapolation, said so)")
    p.add_argument("--vectorize", type=_vectorize, default=None,
                   help="true | false: impose a gradient path, said so in the output (default: the jobs' own, "
                        "task_options.vectorize: auto = vectorised where it runs)")
    p.add_argument("--out", default=None, help="CSV to write (default results/<study>/plan.csv)")
    p.add_argument("--quiet", action="store_true")


def run(args) -> int:
    from ..plan import cmd_plan

    return cmd_plan(args)
