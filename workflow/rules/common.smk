# Target logic of the pipeline, in one place: validate the study, expand it into jobs (bench/pipeline,
# shared with `bench plan`), and name every output and every job's resources. Rules stay thin.
import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import validate

from analysis.figures import FIGURES as KNOWN_FIGURES, QUESTIONS as FIGURE_QUESTIONS
from bench.errors import BenchError
from bench.pipeline import Study, safe
from bench.plan.table import planned_runtimes

validate(config, "../schemas/config.schema.yaml")

try:
    S = Study(config)  # `--config scale=gpu` merges the study's gpu: block by the rule of bench/pipeline/scale.py
except BenchError as err:
    sys.exit(f"error: {err}")  # one line naming the study and the key

STUDY, SCALE = S.name, S.scale
OUT = f"results/{STUDY}"
CELLS, RUNS, RUN_CELL, SEEDS, TUNED_CELLS = S.cells, S.runs, S.run_cell, S.seeds, S.tuned_cells
PLAN_ONLY = str(config.get("plan", False)).lower() == "true"
if not S.has_scale_block:
    logger.info(f"study {STUDY!r} has no {SCALE}: block; scale={SCALE} runs its CPU settings")

# -- resources for cluster profiles -------------------------------------------------------------------
# Per task: memory (MB), runtime (minutes) when no plan says better, GPUs, and CPUs of a job of one process.
TASK_RESOURCES = {
    "cifar10-resnet20": dict(mem_mb=16000, runtime=24 * 60, gpus=1, cpus=8),
    "cifar10-resnet8": dict(mem_mb=16000, runtime=12 * 60, gpus=1, cpus=8),
    "wikitext2-lstm": dict(mem_mb=32000, runtime=24 * 60, gpus=1, cpus=8),
    "imagenet-resnet50": dict(mem_mb=64000, runtime=72 * 60, gpus=1, cpus=16),
}
DEFAULT_RESOURCES = dict(mem_mb=4000, runtime=60, gpus=0, cpus=1)
TASK = TASK_RESOURCES.get(S.task, DEFAULT_RESOURCES)
# A training job's runtime: its planned hours in results/<study>/plan.csv x plan_safety (at least
# plan_floor_minutes), or the task's default above when there is no plan for it.
PLANNED, _PLAN_LINE = planned_runtimes(Path(OUT) / "plan.csv", SCALE, float(config.get("plan_safety", 1.5)),
                                       float(config.get("plan_floor_minutes", 10)))
if RUNS:
    logger.info(_PLAN_LINE)


def job_resources(rule, settings_of):
    """Resources of a training rule's job; ``settings_of(wildcards)`` -> (job name, the job's settings).
    CPUs: one per process of a dist run, at least the task's (the profile sets no global cpus_per_task)."""
    return dict(
        mem_mb=TASK["mem_mb"],
        runtime=lambda wc: PLANNED.get((rule, settings_of(wc)[0]), TASK["runtime"]),
        gpu=TASK["gpus"],
        cpus_per_task=lambda wc: max(S.processes(settings_of(wc)[1]), TASK["cpus"]),
    )


# -- tuning ---------------------------------------------------------------------------------------------
def tune_marker(cell):
    return f"{OUT}/.tune/{cell}.done"


def tuned_values(cell):
    """The YAML of a tuned cell's chosen values (empty for a cell that is not tuned)."""
    return [f"{OUT}/tuned/{cell}.yaml"] if cell in TUNED_CELLS else []


def run_command(run, cell):
    """The shell line of a final run, every word quoted (bench/pipeline/study.py): its own settings, and
    for a tuned cell the tuned knobs read from the cell's YAML instead."""
    (tuned_yaml,) = tuned_values(cell) or [None]
    return S.command(RUNS[run], f"{OUT}/runs/{run}", TUNED_CELLS.get(cell, ()), tuned_yaml)


# -- outputs ----------------------------------------------------------------------------------------------
CONSENSUS = config.get("consensus", {})  # checked with the cells: its graph and compressors
CONSENSUS_METHODS = {safe(m): m for m in CONSENSUS.get("methods", [])}


def figure_caption(png, figure):
    """The caption `python -m analysis figures` wrote for this figure and these runs (figures/index.json):
    the one text of each caption, shown by `snakemake --report` (a placeholder before it is drawn)."""
    from analysis.figures import read_index

    return read_index(Path(png).parent).get(figure, f"{figure}: not drawn yet")


def consensus_traces():
    return [f"{OUT}/consensus/{key}/traces.csv" for key in CONSENSUS_METHODS]


def run_outputs(run):
    return [f"{OUT}/runs/{run}/run.json", f"{OUT}/runs/{run}/metrics.parquet"]


def cell_marker(cell):
    return f"{OUT}/runs/.cells/{cell}.done"


def run_targets():
    """What the analysis waits for: every run's files, or one marker per cell when seeds are grouped."""
    if S.group_seeds:
        return [cell_marker(cell) for cell in CELLS]
    return [path for run in RUNS for path in run_outputs(run)]


FIGURES = config.get("figures", [])
_unknown = [name for name in FIGURES if name not in KNOWN_FIGURES]
if _unknown:
    sys.exit(f"error: study {STUDY!r}: unknown figure {_unknown[0]!r}; known: {', '.join(KNOWN_FIGURES)}")


def all_targets():
    if PLAN_ONLY:  # `--config plan=true`: the rehearsal and plan alone
        return [f"{OUT}/plan.csv"]
    targets = []
    if TUNED_CELLS:
        targets += [f"{OUT}/tuned.csv"]
    if RUNS:
        targets += [f"{OUT}/summary.csv", f"{OUT}/report.md"]
    if CONSENSUS_METHODS:
        targets += [f"{OUT}/consensus/summary.csv"]
    targets += [f"{OUT}/figures/{name}.png" for name in FIGURES]
    return targets
