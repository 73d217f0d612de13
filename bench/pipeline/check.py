"""What the pipeline checks of every cell before it submits anything, with bench's own parsers: so a torus
at n = 37 or `top:2` stops the DAG build with one line instead of failing when its job runs, possibly hours
into a GPU study. Only what is cheap is built: graphs, network models, parsed specs and options, never data sets,
models or operators."""
from __future__ import annotations

from ..algorithms import ALGORITHMS, parse_options
from ..comm.netmodel import make_network
from ..compressors import parse_compressor
from ..errors import BenchError
from ..run.config import RunConfig
from ..tasks import check_option_values
from ..topology import make_topology


class Checks:
    """Checks of one study's cells; a topology is built once per (spec, n, weights), however many cells and
    seeds share it. Random graphs are drawn at the study's first seed only: `make_topology` redraws one
    until it is connected, so whether a shape builds hardly depends on the seed."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._topologies: dict[tuple, str | None] = {}  # -> the error, None when it builds
        self._varying: dict[tuple, bool] = {}  # -> whether the graph changes every round

    def topology(self, spec: str, nodes: int, weights: str | None = None) -> bool:
        """Refuse a graph that cannot be built; whether it is time-varying."""
        key = (spec, nodes, weights)
        if key not in self._topologies:
            try:
                built = make_topology(spec, nodes, weights=weights, seed=self.seed)
                self._topologies[key] = None
                self._varying[key] = bool(getattr(built, "time_varying", False))
            except BenchError as err:
                self._topologies[key] = str(err)
        if self._topologies[key] is not None:
            raise BenchError(self._topologies[key])
        return self._varying[key]

    def run(self, cfg: RunConfig) -> None:
        """What `bench run` would refuse of ``cfg`` short of building its data and model: task option types,
        topology, compressor, the algorithm's use of it, network."""
        check_option_values(cfg.task, cfg.task_options)
        algorithm = ALGORITHMS.get(cfg.algorithm)
        algorithm.check_compressor(parse_compressor(cfg.compressor, contraction=algorithm.contraction))
        options = parse_options(algorithm, cfg.algorithm_options)  # its own knobs: known names and values
        algorithm.check_network(make_network(cfg.network))
        algorithm.check_topology(cfg.topology, self.topology(cfg.topology, cfg.nodes, cfg.weights), options)

    def consensus(self, consensus: dict) -> None:
        """The consensus study's graph and the compressors of its Choco-Gossip methods (`bench consensus`)."""
        try:
            self.topology(consensus["topology"], consensus["nodes"])
        except BenchError as err:
            raise BenchError(f"consensus.topology: {err}") from None
        for spec in consensus.get("methods", []):
            if spec != "exact":
                try:
                    parse_compressor(spec, contraction=ALGORITHMS.get("choco").contraction)
                except BenchError as err:
                    raise BenchError(f"consensus.methods: {err}") from None
