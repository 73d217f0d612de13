"""The non-i.i.d. variants of the studies: every decentralized cell on a partition has all-reduce on the same
partition and n (the gap's reference), and every partition asked for can be dealt to the workers with the study's
batch size. (That each study's DAG builds with its figures: test_pipeline.py; how `sorted` deals: test_data.py.)"""
import itertools

import pytest
import torch
import yaml

from bench.data.partition import WorkerBatches
from snakemake_api import ROOT

NONIID_STUDIES = ["noniid", "table1", "scaling"]
MNIST1D_TRAIN = 4000  # mnist1d-mlp's default training set (bench/tasks/supervised.py)


def study(name):
    return yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())


def cells(config):
    """(algorithm, topology, nodes, data) of every block combination; data defaults as bench's."""
    default = config.get("defaults", {}).get("data", "shuffle")
    for block in config["blocks"].values():
        for method in block["method"]:
            for topology in block["topology"]:
                for nodes in block["nodes"]:
                    for data in block.get("data", [default]):
                        yield method.split("/")[0], topology, nodes, data


@pytest.mark.parametrize("name", NONIID_STUDIES)
def test_every_partition_has_its_all_reduce_reference_and_can_be_dealt(name):
    config = study(name)
    combos = list(cells(config))
    assert config["task"] == "mnist1d-mlp" and len({data for *_, data in combos}) >= 3  # i.i.d., sorted, Dirichlet
    references = {(nodes, data) for algorithm, _, nodes, data in combos if algorithm == "allreduce"}
    missing = {(nodes, data) for algorithm, _, nodes, data in combos if (nodes, data) not in references}
    assert not missing, f"{name}: no all-reduce run at (n, data) {sorted(missing)}"
    batch, labels = config["defaults"]["batch_size"], torch.arange(MNIST1D_TRAIN) % 10  # balanced, as MNIST-1D's
    for (nodes, data), seed in itertools.product(sorted({(n, d) for n, d in references if d != "shuffle"}),
                                                 config.get("seeds", [0])):
        deal = WorkerBatches(labels, nodes, batch, data, seed)  # raises if a worker cannot fill a batch
        assert min(deal.shard_sizes) >= batch

