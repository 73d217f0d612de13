# Target logic of the pipeline, in one place. The config is validated before the DAG is built.
from snakemake.utils import validate

validate(config, "../schemas/config.schema.yaml")

STUDY = config["study"]
OUT = f"results/{STUDY}"


def all_targets():
    targets = []
    if "consensus" in config:
        targets += [f"{OUT}/consensus/summary.csv", f"{OUT}/figures/consensus.png"]
    return targets
