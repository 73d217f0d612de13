"""Building a run's parts from its config: topology, compressor, task, communicator, algorithm."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..algorithms import ALGORITHMS, Algorithm, LocalStep, LocalStepConfig, parse_options
from ..comm import Communicator, SimulatedCommunicator, make_network
from ..compressors import Compressor, make_compressor
from ..compressors.rows import RowStream
from ..errors import BenchError
from ..faults import FaultSchedule, parse_faults
from ..tasks import Task, TaskSetup, make_task
from ..topology import Topology, make_topology
from .config import RunConfig


@dataclass
class Parts:
    topology: Topology
    compressor: Compressor
    task: Task
    comm: Communicator
    algo: Algorithm
    generator: torch.Generator  # compression randomness (checkpointed)
    x0: torch.Tensor
    resolved: dict  # how the algorithm found the knobs left to auto (run.json)
    rank: int = 0
    world: int = 1


def device_of(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"device={name!r} but no CUDA GPU is available here; use --device cpu")
    return device


def _graph_and_method(cfg: RunConfig):
    """The run's topology, algorithm class, compressor and options, each checked against the others."""
    topology = make_topology(cfg.topology, cfg.nodes, weights=cfg.weights, seed=cfg.seed)
    if topology.digest != cfg.graph_digest:  # the run's identity was taken from the file as it was before
        raise BenchError(f"edge list of {cfg.topology!r} changed while the run started; start it again")
    algorithm = ALGORITHMS.get(cfg.algorithm)
    compressor = make_compressor(cfg.compressor, contraction=algorithm.contraction)
    options = parse_options(algorithm, cfg.algorithm_settings())  # its knobs, read by the class that owns them
    algorithm.check_topology(cfg.topology, bool(getattr(topology, "time_varying", False)), options)
    return topology, algorithm, compressor, options


def preflight(cfg: RunConfig) -> None:
    """What ``build`` refuses before any data is read (a graph that cannot be built, a method that cannot run
    on it), checked by a launcher before it starts ranks: bad input is then its one line and status 2, not
    the same line from every rank and a launch that failed."""
    _graph_and_method(cfg)


def build(cfg: RunConfig, device: torch.device, rank: int = 0, world: int = 1) -> Parts:
    topology, algorithm, compressor, options = _graph_and_method(cfg)
    rows = None
    if cfg.backend == "dist":
        from ..comm.distributed import block_of

        rows = block_of(cfg.nodes, world, rank)
    task = make_task(cfg.task, TaskSetup(n_workers=cfg.nodes, batch_size=cfg.batch_size, data=cfg.data,
                                         val_fraction=cfg.val_fraction,
                                         seed=cfg.seed, device=cfg.device, data_root=cfg.data_root,
                                         options=cfg.task_options, rows=rows))
    # a knob left to auto (γ) is found by the algorithm on its own gossip, said unless quiet
    options, resolved = algorithm.resolve_options(options, topology, compressor, seed=cfg.seed, quiet=cfg.quiet)
    segments = task.segments if cfg.per_layer else None
    network = make_network(cfg.network)
    ALGORITHMS.get(cfg.algorithm).check_network(network)
    faults = parse_faults(cfg.faults, cfg.nodes)
    ALGORITHMS.get(cfg.algorithm).check_faults(faults)
    # the same losses in every process and runtime: a pure function of (seed, round, link)
    schedule = FaultSchedule(faults, topology.link_union(), cfg.seed) if faults.loses else None
    if cfg.backend == "dist":
        from ..comm.distributed import DistributedCommunicator

        from ..comm.calibrate import pingpong

        comm: Communicator = DistributedCommunicator(topology, compressor, segments, network, faults=schedule)
        comm.calibrated = pingpong(device)
    else:
        comm = SimulatedCommunicator(topology, network, faults=schedule)
    local = LocalStep(LocalStepConfig(cfg.momentum, cfg.nesterov, cfg.weight_decay),
                      decay_mask=task.decay_mask() if cfg.weight_decay else None)
    generator = torch.Generator(device=device).manual_seed(cfg.seed + 1)
    # every process draws the simulation's random numbers and keeps its own rows
    stream = RowStream(generator, cfg.nodes, task.setup.lo, task.setup.hi)
    x0 = task.init_params()
    algo = algorithm(x0, comm, compressor=compressor, local=local, options=options, generator=stream,
                     segments=segments, shapes=task.shapes if cfg.per_layer else None)
    return Parts(topology, compressor, task, comm, algo, generator, x0, resolved, rank, world)
