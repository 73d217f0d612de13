# Target logic of the pipeline, in one place. The config is validated before the DAG is built.
import re

from snakemake.utils import validate

validate(config, "../schemas/config.schema.yaml")

STUDY = config["study"]
OUT = f"results/{STUDY}"


def method_key(spec):
    """A file-name-safe key for a method spec: top:0.01 -> top0.01, rand:0.01,unbiased=true -> rand0.01_unbiased=true."""
    return re.sub(r"[^A-Za-z0-9.=_-]", "", spec.replace(",", "_"))


CONSENSUS_METHODS = {method_key(m): m for m in config.get("consensus", {}).get("methods", [])}


def consensus_traces():
    return [f"{OUT}/consensus/{key}/traces.csv" for key in CONSENSUS_METHODS]


def all_targets():
    targets = []
    if CONSENSUS_METHODS:
        targets += [f"{OUT}/consensus/summary.csv", f"{OUT}/figures/consensus.png"]
    return targets
