"""`bench plan`: every job a study submits, grouped by run shape, each shape timed for a few real steps
on synthetic data; writes results/<study>/plan.csv and prints the hours per shape, rule and study."""
from __future__ import annotations

import dataclasses
import math
import sys
import tempfile
from pathlib import Path

from .. import yamlio
from ..errors import BenchError
from ..pipeline import Study
from ..pipeline.scale import merge
import torch

from ..cpu_meter import CpuMeter
from .measure import Shape, Timing, measure
from .progress import Progress
from .table import MAX_RUNTIME_MINUTES, Row, capped, runtime_minutes, summary, write_csv

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_SAFETY = 1.5  # the schema's defaults of plan_safety and plan_floor_minutes
DEFAULT_FLOOR_MINUTES = 10
PROFILE = Path(__file__).resolve().parents[2] / "workflow" / "profiles" / "slurm-gpu" / "config.yaml"
BUSY_SHARE = 0.1  # others' share of the CPU above which a timing is called busy (as `bench track` does)


def load_study(files: list[str], scale: str | None) -> dict:
    """The study config from its file(s), merged in order as Snakemake does, checked against the
    pipeline's schema; one line naming the file and the key when it is not valid."""
    from ..run.config import load_yaml

    config: dict = {}
    for path in files:
        config = merge(config, load_yaml(path))
    if scale is not None:
        config["scale"] = scale
    if SCHEMA.exists():
        import jsonschema

        schema = yamlio.load_yaml(SCHEMA.read_text(), str(SCHEMA))
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path) or "the top level"
            raise BenchError(f"{files[-1]}: {where}: {error.message}")
    if "study" not in config:
        raise BenchError(f"{files[-1]} is not a study file (no `study:` key)")
    return config


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    from ..run.setup import device_of

    if not (name == "cpu" or name.startswith("cuda")):
        raise BenchError(f"--device {name!r}; allowed: auto, cpu, cuda, cuda:K")
    return str(device_of(name))


def profile_retries(path: Path = PROFILE) -> int:
    """How many times the cluster profile resubmits a failed job (a job stopped at its time limit is one)."""
    try:
        return int(yamlio.load_yaml(path.read_text(), str(path)).get("retries", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def cmd_plan(args) -> int:
    config = load_study(args.configfile, args.scale)
    study = Study(config)
    safety = args.safety if args.safety is not None else float(config.get("plan_safety", DEFAULT_SAFETY))
    floor = float(config.get("plan_floor_minutes", DEFAULT_FLOOR_MINUTES))
    cap = float(config.get("max_runtime", MAX_RUNTIME_MINUTES))
    device = _device(args.device)
    say = (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    if device == "cpu":
        say("bench plan: timing on the CPU (no GPU here, or --device cpu): the figures are a CPU rehearsal")
    if not study.has_scale_block:
        say(f"bench plan: study {study.name!r} has no {study.scale}: block; planning its CPU settings")

    jobs = study.jobs()
    configs = {job: [study.run_config(settings) for settings in job.runs] for job in jobs}
    shapes: dict[Shape, object] = {}
    for job in sorted(jobs, key=lambda j: j.rule == "tune_cell"):  # a final run represents its shape if any
        for cfg in configs[job]:
            shapes.setdefault(Shape.of(cfg), cfg)
    timings = _time_shapes(shapes, device, args, say)
    rows = [_row(study, job, configs[job], timings, safety, floor, cap) for job in jobs]
    out = Path(args.out) if args.out else Path("results") / study.name / "plan.csv"
    write_csv(out, rows)
    if not jobs:
        print(f"study {study.name!r} at scale={study.scale} submits no training job")
    else:
        print(summary(rows, study.name, study.scale, device, args.steps, args.warmup, safety, floor, cap,
                      profile_retries()))
    print(f"wrote {out}")
    return 0


def _time_shapes(shapes: dict, device: str, args, say) -> dict:
    """{shape: Timing}, each timed with progress lines and the others' CPU share over its timing; a share above
    BUSY_SHARE is warned of (even under --quiet: it says the figures are too long)."""
    progress, timings = Progress(say, len(shapes), args.warmup, args.steps), {}
    progress.start(args.vectorize)
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
        for k, (shape, cfg) in enumerate(shapes.items(), 1):
            progress.shape(k, shape.label())
            with CpuMeter() as meter:
                try:
                    timing = measure(cfg, device, args.steps, args.warmup, Path(tmp) / f"shape{k}",
                                     vectorize=args.vectorize, max_workers=args.max_workers, report=progress)
                except torch.OutOfMemoryError:  # what a rehearsal is for: the shape's jobs are listed, not timed
                    say(f"bench plan: shape {shape.label()} ran out of memory on {device}")
                    timing = Timing.failed(device, f"out of memory on {device}")
            share = float(meter.result.get("others_cpu_share", float("nan")))
            if share > BUSY_SHARE:
                print(f"bench plan: WARNING: other processes took {share:.0%} of this machine's CPU while shape {k} "
                      f"was timed: its times are likely too long (time it again on a quiet machine)", file=sys.stderr)
            timings[shape] = dataclasses.replace(timing, others_cpu_share=share)
    return timings


def _row(study: Study, job, configs: list, timings: dict, safety: float, floor: float, cap: float) -> Row:
    """A job's line of the plan: its runs' steps, evaluations and seconds at the real data sizes."""
    steps = evaluations = 0
    seconds = eval_seconds = 0.0
    for cfg in configs:
        timing = timings[Shape.of(cfg)]
        run_steps, run_evals, s_eval = timing.run_cost(cfg)
        steps, evaluations = steps + run_steps, evaluations + run_evals
        seconds += run_steps * timing.s_step + run_evals * s_eval
        eval_seconds += run_evals * s_eval
    first = timings[Shape.of(configs[0])]
    hours = seconds / 3600
    shares = [timings[Shape.of(c)].others_cpu_share for c in configs]
    busy = max([v for v in shares if math.isfinite(v)], default=float("nan"))  # the busiest of its shapes' timings
    return Row(study.name, study.scale, job.rule, job.name, len(job.runs),
               " + ".join(sorted({Shape.of(c).label() for c in configs})), first.device, first.gradient_path,
               steps, evaluations, first.s_step, eval_seconds / evaluations if evaluations else float("nan"),
               hours, safety, *capped(runtime_minutes(hours, safety, floor), cap), busy, first.note)
