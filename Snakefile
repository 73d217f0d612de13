# Entry of the pipeline: the study's config, the rule files, and the final targets.
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.settings.types import DeploymentMethod
from snakemake.utils import min_version

from bench.pipeline.driver import claim as claim_driver

min_version("8.0")

# Every rule runs `python -m bench|analysis`: that python is the interpreter Snakemake runs in (the one that
# imports bench in common.smk), so `.venv/bin/snakemake` works with nothing activated. Under `--sdm conda`
# each rule's own environment (workflow/envs/bench.yaml) provides python instead.
ON_PATH = f"export PATH={shlex.quote(os.path.dirname(sys.executable))}:\"$PATH\"; "
# One driver per working folder: the locks a killed one left are removed (no `--unlock` by hand), and each job
# is told this driver's identity, so that a job whose driver is killed stops (bench/pipeline/driver.py)
DRIVER, STALE_LOCKS = claim_driver(Path.cwd())
shell.prefix((ON_PATH if DeploymentMethod.CONDA not in workflow.deployment_settings.deployment_method else "") + DRIVER)
if STALE_LOCKS:
    print(f"removed the locks a killed pipeline driver left: .snakemake/locks/{', '.join(STALE_LOCKS)}",
          file=sys.stderr)

# The default study, unless another study file is given (--configfile config/<study>.yaml); a
# study file replaces it entirely instead of being merged into it. `--config KEY=VALUE` goes over either.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/consensus.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/runs.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/plan.smk"


# Jobs that only read and write small files run where snakemake runs, never as cluster jobs.
localrules:
    select_cell,
    tuned_table,
    summarize,
    figure,
    report,
    browser,
    consensus_summary,


rule all:
    input:
        all_targets(),


# `make reproduce` sets BENCH_STATUS (seconds): every so often one line of the study's runs done, running and left
# with an ETA (bench/pipeline/status.py), in place of Snakemake's scroll of rule blocks (errors still show, logs named).
# Only where the pipeline is driven: never in a cluster job's own snakemake, nor in a dry run or a plan.
from bench.pipeline.status import Quieter, Watch, watch_seconds

_EVERY = watch_seconds(os.environ.get("BENCH_STATUS"))
WATCH = None
if _EVERY and RUNS and not PLAN_ONLY and workflow.is_main_process and not workflow.dryrun:
    _slots = max(1, (workflow._cores or 1) // max(S.processes(s) for s in RUNS.values()))
    WATCH = Watch(S, Path(OUT), Path("logs") / STUDY / "runs", _slots, _EVERY).start()
    logger.addFilter(Quieter())


onsuccess:
    if WATCH:
        WATCH.stop()


onerror:
    if WATCH:
        WATCH.stop()
