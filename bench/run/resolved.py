"""A run's settings turned into their parts (method and options, compressor, graph, network, faults, backend,
device), with every combination of them checked, once: by `bench run` before anything is written, by the
DAG build for each cell, and by each process that builds the run. A single setting's range is config.py's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..algorithms import ALGORITHMS, Method, parse_options
from ..comm.netmodel import NetworkModel, make_network
from ..compressors import Compressor, make_compressor
from ..errors import BenchError
from ..faults import FaultSpec, parse_faults
from ..tasks import check_option_values
from ..topology import Topology, make_topology
from .config import RunConfig

# built graphs by (spec, n, weights, seed), or the one line that refused one: a DAG of thousands of cells
# builds each graph once
Graphs = dict[tuple, Any]


@dataclass(frozen=True)
class Resolved:
    """The parsed parts of ``cfg``, each checked against the others."""
    cfg: RunConfig
    method: type[Method]
    options: Any  # the method's frozen options (a knob may still be `auto`: found when the run is built)
    compressor: Compressor  # an operator: building one allocates nothing
    topology: Topology  # or a TimeVaryingTopology
    network: NetworkModel
    faults: FaultSpec  # FaultSpec() for a perfect network
    backend: str  # sim | dist
    device: torch.device  # named, not yet asked for (available() where the run starts)


def resolve_run(cfg: RunConfig, graphs: Graphs | None = None) -> Resolved:
    """``cfg``'s parts, or one line (BenchError) naming the first combination that cannot run. ``graphs``: a
    cache shared by many calls (the DAG build's), None to build the graph afresh."""
    check_option_values(cfg.task, cfg.task_options)
    method = ALGORITHMS.get(cfg.algorithm)
    compressor = make_compressor(cfg.compressor, contraction=method.contraction)
    method.check_compressor(compressor)
    faults = parse_faults(cfg.faults, cfg.nodes)
    options = parse_options(method, {**_settings(cfg, method, faults), **cfg.algorithm_options})
    method.check_backend(cfg.backend)
    method.check_faults(faults)  # a method without a rule for lost messages is refused
    network = make_network(cfg.network)
    method.check_network(network)
    topology = graph(cfg.topology, cfg.nodes, cfg.weights, cfg.seed, graphs)
    # a run's identity was taken from a graph file as it was before (a DAG build, which reads each file once
    # through its cache, takes no identity)
    if graphs is None and topology.digest != cfg.graph_digest:
        raise BenchError(f"edge list of {cfg.topology!r} changed while the run started; start it again")
    method.check_topology(cfg.topology, bool(getattr(topology, "time_varying", False)), options)
    if cfg.procs is not None and (cfg.procs < 1 or cfg.nodes % cfg.procs):
        raise BenchError(f"procs={cfg.procs} must divide nodes={cfg.nodes}")
    return Resolved(cfg, method, options, compressor, topology, network, faults, cfg.backend,
                    torch.device(cfg.device))


def _settings(cfg: RunConfig, method: type[Method], faults: FaultSpec) -> dict[str, Any]:
    """The run settings the method reads by name (its ``settings``, e.g. AD-PSGD's faults and seed), parsed
    where this module parses them."""
    parsed = {"faults": faults}
    return {key: parsed.get(key, getattr(cfg, key)) for key in method.settings}


def graph(spec: str, nodes: int, weights: str | None, seed: int, graphs: Graphs | None = None):
    """The topology ``spec`` on ``nodes`` workers, from ``graphs`` when it was built (or refused) before."""
    if graphs is None:
        return make_topology(spec, nodes, weights=weights, seed=seed)
    key = (spec, nodes, weights, seed)
    if key not in graphs:
        try:
            graphs[key] = make_topology(spec, nodes, weights=weights, seed=seed)
        except BenchError as err:
            graphs[key] = str(err)
    if isinstance(graphs[key], str):
        raise BenchError(graphs[key])
    return graphs[key]


def available(device: torch.device) -> torch.device:
    """``device`` when this machine has it; one line otherwise (asked where a run starts, not at a DAG build,
    which may run where the GPUs are not)."""
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"device={str(device)!r} but no CUDA GPU is available here; use --device cpu")
    return device
