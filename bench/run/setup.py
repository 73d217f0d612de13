"""Building a run's parts from its resolved settings (bench/run/resolved.py): task, communicator, algorithm."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..algorithms import Algorithm, LocalStep, LocalStepConfig
from ..comm import Communicator, SimulatedCommunicator
from ..compressors import Compressor
from ..compressors.rows import RowStream
from ..faults import FaultSchedule, FaultSpec
from ..tasks import Task, TaskSetup, make_task
from ..topology import Topology
from .resolved import Resolved, available


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
    faults: FaultSpec  # the run's unreliable network (FaultSpec() for a perfect one)
    rank: int = 0
    world: int = 1


def device_of(name: str) -> torch.device:
    """The device ``name`` when this machine has it (commands other than `bench run`: plan, perf)."""
    return available(torch.device(name))


def build(run: Resolved, rank: int = 0, world: int = 1) -> Parts:
    """The run's data, model, communicator and algorithm from its resolved parts (nothing parsed again)."""
    cfg, topology, compressor, device = run.cfg, run.topology, run.compressor, run.device
    rows = None
    if cfg.backend == "dist":
        from ..comm.distributed import block_of

        rows = block_of(cfg.nodes, world, rank)
    task = make_task(cfg.task, TaskSetup(n_workers=cfg.nodes, batch_size=cfg.batch_size, data=cfg.data,
                                         val_fraction=cfg.val_fraction,
                                         seed=cfg.seed, device=cfg.device, data_root=cfg.data_root,
                                         options=cfg.task_options, rows=rows))
    # a knob left to auto (γ) is found by the algorithm on its own gossip, said unless quiet
    options, resolved = run.method.resolve_options(run.options, topology, compressor, seed=cfg.seed,
                                                   quiet=cfg.quiet)
    segments = task.segments if cfg.per_layer else None
    network, faults = run.network, run.faults
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
    algo = run.method(x0, comm, compressor=compressor, local=local, options=options, generator=stream,
                      segments=segments, shapes=task.shapes if cfg.per_layer else None)
    return Parts(topology, compressor, task, comm, algo, generator, x0, resolved, faults, rank, world)
