# Target logic of the pipeline, in one place: validate the study, expand it into jobs (bench/pipeline,
# shared with `bench plan`), and name every output and every job's resources. Rules stay thin.
import math
import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import validate

from analysis.figures import FIGURES as KNOWN_FIGURES, QUESTIONS as FIGURE_QUESTIONS
from analysis.report_html import report_categories
from analysis.figures.requirements import Grid, cells_frame, unmet
from bench.algorithms import shortcuts
from bench.tasks import RESOURCES as TASK_DEFAULTS, TASKS
from bench.errors import BenchError
from bench.pipeline import Study
from bench.pipeline.names import keyed
from bench.plan.table import planned_runtimes
from bench.run.config import KEYS as RUN_KEYS, RunConfig
from bench.yamlio import check_plain, read_yaml

# Snakemake reads --configfile itself, aliases and all: a "billion laughs" of aliases would be expanded by the
# schema's validation, so the config is first held to what bench's own YAML reader admits (bench/yamlio.py)
try:
    check_plain(config, "the study's config")
    SCHEMA_KEYS = read_yaml(Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml",
                            "the config schema")["properties"]
except BenchError as err:
    sys.exit(f"error: {err}")

# Run settings given on the command line (`--config epochs=3 lr=0.05`) replace the study's defaults, at
# every scale; a block that sets the key itself keeps its own value (docs/reference.md, "Overrides").
# (an algorithm's knob by its run-level word too: gamma, order, gamma_tune_steps)
SETTING_WORDS = {*RUN_KEYS, *shortcuts()}
OVERRIDES = {key: config.pop(key) for key in list(config) if key in SETTING_WORDS and key not in SCHEMA_KEYS}
for where in [config] + [config[s] for s in ("gpu",) if isinstance(config.get(s), dict) and "defaults" in config[s]]:
    where["defaults"] = {**(where.get("defaults") or {}), **OVERRIDES}
if OVERRIDES:
    logger.info("command-line settings replace the study's defaults: "
                + ", ".join(f"{k}={v!r}" for k, v in OVERRIDES.items()))
try:
    validate(config, "../schemas/config.schema.yaml")
except Exception as err:  # Snakemake's message ends in the whole schema: one line instead
    text = str(err)
    why = next((line for line in text.splitlines() if line.startswith("ValidationError")), text.splitlines()[0])
    sys.exit(f"error: the study's config: {why.removeprefix('ValidationError: ')}; top-level keys: "
             f"{', '.join(SCHEMA_KEYS)}, or any setting of `bench run` (e.g. epochs=3) to replace the defaults")

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
# The task declares them (its class in bench/tasks: memory, runtime of ONE run when no plan says better, GPUs,
# CPUs of a job of one process). The runtime is a generous bound on one training run; a job is asked that many
# times the runs' worth of work it holds (below), until `--config plan=true` has timed it.
TASK = TASKS.get(S.task).resources if S.task else dict(TASK_DEFAULTS)  # a study of no task: consensus
PLAN_SAFETY, PLAN_FLOOR = float(config.get("plan_safety", 1.5)), float(config.get("plan_floor_minutes", 10))
# A training job's runtime: its planned hours in results/<study>/plan.csv x plan_safety (at least
# plan_floor_minutes), or, when there is no plan for it, the task's runtime x the job's work in runs.
PLANNED, _PLAN_LINE = planned_runtimes(Path(OUT) / "plan.csv", SCALE, PLAN_SAFETY, PLAN_FLOOR,
                                       device="cuda" if SCALE == "gpu" else None)  # the GPU version runs on cuda
# No job asks for more than max_runtime minutes (48 h by default: within most GPU partitions' limits); a
# longer one is cut to it and said so, and resumes from its checkpoint when it is requeued or rerun.
MAX_RUNTIME = int(float(config.get("max_runtime", 48 * 60)))


def run_equivalents(job):
    """The work of a job (bench/pipeline's Job) in full training runs: 1 for a run, the seeds of a cell with
    grouped seeds, and for a tuning job every trial's share of the schedule (stop_at / epochs of each
    rung) and the most the grid's extension can add (Study.tuning_work, which `bench plan` times too)."""
    work = 0.0
    for settings in job.runs:
        epochs = float(S.merged(settings).get("epochs", RunConfig.epochs))  # bench's default when unset
        stop_at = settings.get("stop_at")
        work += 1.0 if stop_at is None else min(float(stop_at), epochs) / epochs
    return work


DEFAULT_RUNTIMES = {(job.rule, job.name): max(int(PLAN_FLOOR),
                                               math.ceil(round(TASK["runtime"] * run_equivalents(job), 6)))
                    for job in S.jobs()}
if RUNS and (SCALE == "gpu" or PLANNED or _PLAN_LINE.startswith("WARNING")):  # a job's runtime is a cluster's
    (logger.warning if _PLAN_LINE.startswith("WARNING") else logger.info)(_PLAN_LINE)
    _long = [key for key, minutes in DEFAULT_RUNTIMES.items() if PLANNED.get(key, minutes) > MAX_RUNTIME]
    if _long:
        logger.warning(f"{len(_long)} training jobs would ask for more than max_runtime={MAX_RUNTIME} min; each asks "
                       f"for {MAX_RUNTIME} min and resumes from its checkpoint when requeued or rerun "
                       "(`--config max_runtime=MINUTES` for your partition's limit)")
    _unplanned = [minutes for key, minutes in DEFAULT_RUNTIMES.items() if key not in PLANNED]
    if _unplanned and max(_unplanned) > 72 * 60:
        logger.info(f"{len(_unplanned)} training jobs have no plan and ask for the task's runtime x their work "
                    f"(longest {max(_unplanned) / 60:,.0f} h); `--config plan=true` times them (docs/plan.md)")


def job_runtime(rule, name):
    """Minutes asked for a training job: its plan, else the task's runtime x the job's work in runs."""
    return min(MAX_RUNTIME, PLANNED.get((rule, name), DEFAULT_RUNTIMES.get((rule, name), TASK["runtime"])))


def job_resources(rule, settings_of):
    """Resources of a training rule's job; ``settings_of(wildcards)`` -> (job name, the job's settings).
    CPUs (cpus_per_task, which the SLURM plugin asks instead of threads): one per process of a dist run
    (its threads), at least the task's share for a run of one process; the profiles set no global value."""
    return dict(
        mem_mb=TASK["mem_mb"],
        runtime=lambda wc: job_runtime(rule, settings_of(wc)[0]),
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
CONSENSUS = S.consensus  # the study's consensus: block at its scale, checked with the cells: its graph and compressors
try:  # folder name -> method, one folder each (bench/pipeline/names.py)
    CONSENSUS_METHODS = keyed(CONSENSUS.get("methods", []), f"study {STUDY!r}: consensus.methods")
except BenchError as err:
    sys.exit(f"error: {err}")


def figure_caption(png, figure):
    """The caption `python -m analysis figures` wrote for this figure and these runs (figures/index.json),
    as literal reST for `snakemake --report` (figure.rst): names in it stay text, never a directive."""
    from analysis.report_html import report_caption

    return report_caption(Path(png).parent, figure)


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
# the report's groups, numbered 1, 2, 3, ... with no gaps for the questions this study's figures leave out
TABLES_CATEGORY = "1. Tables and verdicts"
FIGURE_CATEGORIES = report_categories(FIGURE_QUESTIONS, FIGURES, TABLES_CATEGORY)
_unknown = [name for name in FIGURES if name not in KNOWN_FIGURES]
if _unknown:
    sys.exit(f"error: study {STUDY!r}: unknown figure {_unknown[0]!r}; known: {', '.join(KNOWN_FIGURES)}")
# a figure the study's cells cannot give is refused now, not found missing after the runs (what each figure
# needs: the `needs` of its module in analysis/figures/)
_FIGURE_GRID = Grid(cells_frame([S.configs[cell].to_dict() for cell in CELLS]), tune_grid=S.tune_grid,
                    tuned=TUNED_CELLS, consensus=CONSENSUS, metrics=S.metrics)
for _figure, _why in unmet(FIGURES, _FIGURE_GRID)[:1]:
    sys.exit(f"error: study {STUDY!r} at scale={SCALE}: figure {_figure!r} cannot be drawn from its cells: {_why}")


def all_targets():
    if PLAN_ONLY:  # `--config plan=true`: the rehearsal and plan alone
        return [f"{OUT}/plan.csv"]
    targets = []
    if TUNED_CELLS:
        targets += [f"{OUT}/tuned.csv"]
    if RUNS:
        targets += [f"{OUT}/summary.csv", f"{OUT}/report.md", f"{OUT}/browser.html"]
    if CONSENSUS_METHODS:
        targets += [f"{OUT}/consensus/summary.csv"]
    targets += [f"{OUT}/figures/{name}.png" for name in FIGURES]
    return targets
