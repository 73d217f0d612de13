# Entry of the pipeline: the study's config, the rule files, and the final targets.
import json
import os

from snakemake.utils import min_version

min_version("8.0")

# The default study, unless another study file is given (--configfile config/<study>.yaml); a
# study file replaces it entirely instead of being merged into it.
if "study" not in config:

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
    consensus_summary,


rule all:
    input:
        all_targets(),
