"""The plan as a table: one row per job (results/<study>/plan.csv), the printed summary per shape and
per rule, and the SLURM runtime the pipeline asks for each job (planned hours x safety, with a floor, at
most max_runtime a submission: a longer job is stopped at the limit and resumes from its checkpoint when
resubmitted, as workflow/rules/common.smk and the slurm-gpu profile's `retries` do)."""
from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from ..files import atomic_write_text

COLUMNS = ("study", "scale", "rule", "job", "runs", "shape", "device", "gradient_path", "steps", "evaluations",
           "s_per_step", "s_per_eval", "hours", "safety", "runtime_min", "submissions", "others_cpu_share", "note")
MAX_RUNTIME_MINUTES = 48 * 60  # the pipeline's default max_runtime (workflow/rules/common.smk)


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
    runtime_min: int | None  # what the pipeline asks SLURM for: hours x safety, at least the floor, at most the cap
    submissions: int | None  # SLURM jobs of runtime_min it takes (more than 1: past the cap, resumed from checkpoints)
    others_cpu_share: float  # of the machine's CPU, taken by other processes while its shape was timed (cpu_meter)
    note: str


def runtime_minutes(hours: float, safety: float, floor_minutes: float) -> int | None:
    """None for a job the plan could not time (the pipeline then asks the task's runtime for one run × the
    job's work in runs)."""
    if not math.isfinite(hours):
        return None
    return int(max(floor_minutes, math.ceil(hours * 60 * safety)))


def capped(minutes: int | None, cap_minutes: float) -> tuple[int | None, int | None]:
    """(minutes asked a submission, submissions) of a job that needs ``minutes``: the pipeline asks at most
    the cap; a job stopped there resumes from its checkpoint in the next submission."""
    if minutes is None:
        return None, None
    return int(min(minutes, cap_minutes)), max(1, math.ceil(minutes / cap_minutes))


def write_csv(path: Path, rows: list[Row]) -> None:
    """Atomically (temporary name, then rename)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        record = asdict(row)
        for key in ("s_per_step", "s_per_eval", "hours", "others_cpu_share"):
            record[key] = f"{record[key]:.6g}"
        writer.writerow(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, buffer.getvalue())


def _hours(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def summary(rows: list[Row], study: str, scale: str, device: str, steps: int, warmup: int, safety: float,
            floor_minutes: float, cap_minutes: float = MAX_RUNTIME_MINUTES, retries: int = 1) -> str:
    """The printed table: per shape, per rule, and the study's total; then the jobs past the cap."""
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
                 f"{'s/eval':>9}  {unit:>18}  busy")
    for shape, members in by_shape.items():
        first = members[0]
        lines.append(f"{shape:<{width}}  {first.gradient_path:>5}  {len(members):>5}  "
                     f"{sum(r.runs for r in members):>5}  {sum(r.steps for r in members):>11,}  "
                     f"{first.s_per_step:>9.4g}  {first.s_per_eval:>9.4g}  "
                     f"{_hours(sum(r.hours for r in members)):>18}  {_share(first.others_cpu_share)}")
    lines.append("")
    lines.append(f"{'rule':<10}  {'jobs':>5}  {'steps':>13}  {unit:>18}  runtime asked (x{safety:g}, >= "
                 f"{floor_minutes:g} min, <= {cap_minutes / 60:g} h a job): longest job, sum")
    by_rule: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_rule[row.rule].append(row)
    for rule, members in [*by_rule.items(), ("total", rows)]:
        asked = [(r.runtime_min, r.submissions) for r in members if r.runtime_min is not None]
        lines.append(f"{rule:<10}  {len(members):>5}  {sum(r.steps for r in members):>13,}  "
                     f"{_hours(sum(r.hours for r in members)):>18}  "
                     f"{max((m for m, _ in asked), default=0) / 60:,.1f} h, {sum(m * k for m, k in asked) / 60:,.1f} h")
    lines += cap_lines(rows, cap_minutes, retries)
    notes = sorted({r.note for r in rows if r.note})
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def _share(value: float) -> str:
    return f"{value:.0%}" if math.isfinite(value) else "-"


def cap_lines(rows: list[Row], cap_minutes: float, retries: int) -> list[str]:
    """The longest job as the profile runs it, and what the cap means for the jobs past it: each asks the cap,
    is stopped there and resumes from its checkpoint in the next submission; a snakemake call submits a job
    at most 1 + retries times, so a job of more submissions than that finishes only over several calls."""
    timed = [r for r in rows if r.submissions is not None]
    if not timed:
        return []
    longest = max(timed, key=lambda r: r.hours)
    need = longest.hours * longest.safety
    cap_h, calls = cap_minutes / 60, 1 + retries
    lines = [f"longest job: {longest.rule} {longest.job}, {_hours(longest.hours)} h planned, "
             f"{_hours(need)} h with x{longest.safety:g}: "
             + (f"one job of {longest.runtime_min / 60:,.1f} h" if longest.submissions == 1 else
                f"{longest.submissions} submissions of {cap_h:g} h (max_runtime), each resuming from the last one's "
                f"checkpoint")]
    over = [r for r in timed if r.submissions > 1]
    if over:
        beyond = [r for r in over if r.submissions > calls]
        lines.append(f"{len(over)} of {len(rows)} jobs need more than max_runtime ({cap_h:g} h): each asks "
                     f"{cap_h:g} h, is stopped there and resumes from its checkpoint when resubmitted; the profile "
                     f"submits a job at most {calls} times a snakemake call (retries: {retries}), "
                     + (f"so {len(beyond)} of them need snakemake run again (up to "
                        f"{max(math.ceil(r.submissions / calls) for r in beyond)} calls in all)" if beyond
                        else "enough for each of them"))
    return lines


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
