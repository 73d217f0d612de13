# Entry of the pipeline: the study's config, the rule files, and the final targets.
from snakemake.utils import min_version

min_version("8.0")

configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/consensus.smk"


rule all:
    input:
        all_targets(),
