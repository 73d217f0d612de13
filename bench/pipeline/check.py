"""What the pipeline checks of every cell before it submits anything: what `bench run` checks before it writes
anything (bench/run/resolved.py), so a torus at n = 37, `top:2` or faults a method has no rule for stop the DAG
build with one line instead of failing when its job runs, possibly hours into a GPU study. Graphs, network
models, operators, parsed specs and options are built; never data sets or models."""
from __future__ import annotations

import dataclasses

from ..algorithms import ALGORITHMS
from ..compressors import parse_compressor
from ..errors import BenchError
from ..run.config import RunConfig
from ..run.resolved import Graphs, graph, resolve_run


class Checks:
    """Checks of one study's cells; a topology is built once per (spec, n, weights), however many cells and
    seeds share it. Random graphs are drawn at the study's first seed only: `make_topology` redraws one
    until it is connected, so whether a shape builds hardly depends on the seed."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.graphs: Graphs = {}

    def run(self, cfg: RunConfig) -> None:
        """What `bench run` would refuse of ``cfg`` before it writes anything (its settings against each other),
        its graph drawn at the study's first seed."""
        resolve_run(cfg if cfg.seed == self.seed else dataclasses.replace(cfg, seed=self.seed), self.graphs)

    def consensus(self, consensus: dict) -> None:
        """The consensus study's graph and the compressors of its Choco-Gossip methods (`bench consensus`)."""
        try:
            graph(consensus["topology"], consensus["nodes"], None, self.seed, self.graphs)
        except BenchError as err:
            raise BenchError(f"consensus.topology: {err}") from None
        for spec in consensus.get("methods", []):
            if spec != "exact":
                try:
                    parse_compressor(spec, contraction=ALGORITHMS.get("choco").contraction)
                except BenchError as err:
                    raise BenchError(f"consensus.methods: {err}") from None
