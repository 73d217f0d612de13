"""The plan as a table: one row per job (results/<study>/plan.csv), the printed summary per shape and
per rule, and the SLURM runtime the pipeline asks for each job (planned hours x safety, with a floor)."""
from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from ..files import atomic_write_text

COLUMNS = ("study", "scale", "rule", "job", "runs", "shape", "device", "gradient_path", "steps", "evaluations",
           "s_per_step", "s_per_eval", "hours", "safety", "runtime_min", "note")


@dataclass
class Row:
    study: str
    scale: str
    rule: str  # the Snakemake rule that submits the job
    job: str  # the job's wildcard value (run or cell)
    runs: int  # `bench run`s the job makes in turn (seeds of a cell, tuning trials)
    shape: str
    device: str  # where s_per_step and s_per_eval were measured
    gradient_path: str
    steps: int  # training steps of all its runs, at the real data sizes
    evaluations: int
    s_per_step: float
    s_per_eval: float  # mean over the job's evaluations (averaged model and sampled local models)
    hours: float  # steps x s/step + evaluations x s/eval, without the safety factor
    safety: float
    runtime_min: int | None  # what the pipeline asks SLURM for: hours x safety, at least the floor
    note: str


def runtime_minutes(hours: float, safety: float, floor_minutes: float) -> int | None:
    """None for a job the plan could not time (the pipeline then asks the task's runtime for one run × the
    job's work in runs)."""
    if not math.isfinite(hours):
        return None
    return int(max(floor_minutes, math.ceil(hours * 60 * safety)))


def write_csv(path: Path, rows: list[Row]) -> None:
    """Atomically (temporary name, then rename)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        record = asdict(row)
        for key in ("s_per_step", "s_per_eval", "hours"):
            record[key] = f"{record[key]:.6g}"
        writer.writerow(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, buffer.getvalue())


def _hours(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def summary(rows: list[Row], study: str, scale: str, device: str, steps: int, warmup: int, safety: float,
            floor_minutes: float) -> str:
    """The printed table: per shape, per rule, and the study's total."""
    cpu = not device.startswith("cuda")
    unit = "hours on this CPU" if cpu else "GPU-hours"
    lines = [f"# plan of study {study!r} at scale={scale}: {len(rows)} jobs, timed on {device} "
             f"({warmup} warm-up + {steps} timed steps per shape, synthetic data, real data sizes)"]
    if cpu:
        lines.append("# measured on the CPU (no GPU used): a CPU rehearsal, not GPU figures")
    by_shape: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_shape[row.shape].append(row)
    width = max([len(s) for s in by_shape] + [5])
    lines.append(f"{'shape':<{width}}  {'path':>5}  {'jobs':>5}  {'runs':>5}  {'steps':>11}  {'s/step':>9}  "
                 f"{'s/eval':>9}  {unit:>18}")
    for shape, members in by_shape.items():
        first = members[0]
        lines.append(f"{shape:<{width}}  {first.gradient_path:>5}  {len(members):>5}  "
                     f"{sum(r.runs for r in members):>5}  {sum(r.steps for r in members):>11,}  "
                     f"{first.s_per_step:>9.4g}  {first.s_per_eval:>9.4g}  {_hours(sum(r.hours for r in members)):>18}")
    lines.append("")
    lines.append(f"{'rule':<10}  {'jobs':>5}  {'steps':>13}  {unit:>18}  runtime asked (x{safety:g}, >= "
                 f"{floor_minutes:g} min): longest job, sum")
    by_rule: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_rule[row.rule].append(row)
    for rule, members in [*by_rule.items(), ("total", rows)]:
        asked = [r.runtime_min for r in members if r.runtime_min is not None]
        lines.append(f"{rule:<10}  {len(members):>5}  {sum(r.steps for r in members):>13,}  "
                     f"{_hours(sum(r.hours for r in members)):>18}  "
                     f"{max(asked, default=0) / 60:,.1f} h, {sum(asked) / 60:,.1f} h")
    notes = sorted({r.note for r in rows if r.note})
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def device_kind(device: str) -> str:
    """``cuda`` for any GPU device name of a plan (cuda, cuda:0), else ``cpu``."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


def planned_runtimes(path: Path, scale: str, safety: float, floor_minutes: float,
                     device: str | None = None) -> tuple[dict, str]:
    """{(rule, job): minutes} from a plan.csv of this ``scale``, and the one line that says where the
    training jobs' runtime comes from. ``device``: the kind the jobs will run on (``cuda`` at scale=gpu);
    rows timed on another kind (a CPU rehearsal of a GPU study) are not used, and the line says so in
    capitals, since their times would ask a GPU partition for days."""
    default = "runtime of the training jobs: the task's runtime per run x the job's work in runs"
    if not path.exists():
        return {}, f"{default} (no {path}: `bench plan` or `--config plan=true` makes one)"
    with open(path, newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("scale") == scale]
    if device is not None:
        other = sorted({r.get("device", "?") for r in rows if device_kind(r.get("device", "")) != device})
        rows = [r for r in rows if device_kind(r.get("device", "")) == device]
        if other and not rows:
            return {}, (f"WARNING: {path} was timed on {', '.join(other)}, but these jobs run on {device}: its "
                        f"times are NOT used ({default}); plan on a {device} node (docs/plan.md)")
    out = {}
    for row in rows:
        try:
            hours = float(row["hours"])
        except (KeyError, ValueError):
            continue
        if math.isfinite(hours):
            out[(row["rule"], row["job"])] = runtime_minutes(hours, safety, floor_minutes)
    if not out:
        return {}, f"{default} ({path} holds no timed job at scale={scale})"
    devices = ", ".join(sorted({r["device"] for r in rows}))
    return out, (f"runtime of {len(out)} training jobs: planned in {path} (timed on {devices}) x {safety:g}, "
                 f"at least {floor_minutes:g} min; any other job: the task's runtime per run x its work in runs")
