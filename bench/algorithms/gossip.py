"""Average consensus with and without compression: a method's gossip alone (its step with no gradient) against
exact gossip.

Each worker starts from its own random vector; the goal is the exact initial average. This is the problem on
which the paper's authors tune Choco's consensus step γ (``tune_gamma``), and on which every method with a
consensus step tunes its own (its gossip: Choco-Gossip for Choco, BEER's or DeepSqueeze's for theirs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..comm import SimulatedCommunicator, Traffic
from ..compressors import make_compressor, measure_delta
from ..errors import BenchError
from ..topology import Topology
from .base import ALGORITHMS, parse_options

DEFAULT_GAMMA_GRID = tuple(float(g) for g in np.logspace(-3, 0, 20))
DIVERGED_FACTOR = 1e3  # relative error above this: the iteration blew up (as a training loss > 1e3 does)


@dataclass
class ConsensusTrace:
    method: str  # "exact" or the compressor spec
    gamma: float
    steps: list[int] = field(default_factory=list)
    rel_error: list[float] = field(default_factory=list)  # (1/n)Σ‖x_i − x̄⁰‖² over its value at step 0
    bits_per_worker: list[float] = field(default_factory=list)  # cumulative bits on a worker's links (mean)
    bits_per_worker_max: list[float] = field(default_factory=list)  # the most any worker sent
    paper_bits_per_worker: list[float] = field(default_factory=list)
    delta_measured: float | None = None
    diverged: bool = False

    @property
    def final_error(self) -> float:
        return math.inf if self.diverged else self.rel_error[-1]


def initial_vectors(n: int, dim: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=gen, dtype=dtype)


def _make(method: str, x0, comm, compressor=None, options=None, generator=None):
    cls = ALGORITHMS.get(method)
    return cls(x0, comm, compressor=compressor, options=parse_options(cls, options), generator=generator)


def run_consensus(topology: Topology, compressor: str | None, gamma: float = 1.0, steps: int = 1000,
                  dim: int = 2000, seed: int = 0, record_every: int = 1, dtype=torch.float64,
                  method: str = "choco") -> ConsensusTrace:
    """The gossip of ``method`` (its step without gradients; Choco-Gossip by default) with ``compressor``
    (``None``: exact gossip ``x ← W x``) for ``steps`` rounds."""
    if topology.n < 2:  # its error is 0 from the start, and the relative error 0/0
        raise BenchError(f"consensus needs n >= 2 workers; got n={topology.n} (one worker is its own average)")
    x0 = initial_vectors(topology.n, dim, seed, dtype)
    target = x0.mean(dim=0)
    comm = SimulatedCommunicator(topology)
    gen = torch.Generator().manual_seed(seed + 1)
    if compressor is None:
        algo = _make("dpsgd", x0, comm)
        trace = ConsensusTrace("exact", 1.0)
    else:
        comp = make_compressor(compressor, contraction=ALGORITHMS.get(method).contraction)  # Choco's: one
        algo = _make(method, x0, comm, compressor=comp, options={"gamma": gamma}, generator=gen)
        trace = ConsensusTrace(comp.spec, gamma)
        trace.delta_measured = measure_delta(comp, x0, torch.Generator().manual_seed(seed + 2))

    e0 = float(((x0 - target) ** 2).sum(dim=1).mean())
    sent = Traffic()

    def record(t: int) -> None:
        err = float(((algo.x - target) ** 2).sum(dim=1).mean()) / e0
        trace.steps.append(t)
        trace.rel_error.append(err)
        trace.bits_per_worker.append(sent.wire_bits)
        trace.bits_per_worker_max.append(sent.wire_bits_max)
        trace.paper_bits_per_worker.append(sent.paper_bits)
        if not math.isfinite(err) or err > DIVERGED_FACTOR:
            trace.diverged = True

    record(0)
    for t in range(1, steps + 1):
        traffic = algo.step(None, 0.0)
        sent.add(traffic)
        if t % record_every == 0 or t == steps:
            record(t)
            if trace.diverged:
                break
    return trace


def tune_gamma(topology: Topology, compressor: str, grid=DEFAULT_GAMMA_GRID, steps: int = 1000,
               dim: int = 2000, seed: int = 0, progress=iter, method: str = "choco") -> list[ConsensusTrace]:
    """One run of ``method``'s gossip (Choco-Gossip by default) per γ of ``grid`` (iterated through
    ``progress``, e.g. a bar); the best is the lowest final error (``best_of``)."""
    return [run_consensus(topology, compressor, gamma=g, steps=steps, dim=dim, seed=seed,
                          record_every=max(1, steps // 50), method=method) for g in progress(grid)]


def best_of(traces: list[ConsensusTrace], gossip: str = "Choco-Gossip") -> ConsensusTrace:
    """The trace of the lowest final error (the larger γ of a tie). A search where every γ diverged found
    nothing: one line naming the grid, never its last value taken as tuned."""
    if all(tr.diverged for tr in traces):
        gammas = [tr.gamma for tr in traces]
        raise BenchError(f"every γ of the grid ({len(gammas)} values, {min(gammas):.3g} to {max(gammas):.3g}) diverges "
                         f"in {gossip} with {traces[0].method}: no step to tune; give gamma=VALUE, another "
                         "compressor, or a grid of smaller steps")
    return min(traces, key=lambda tr: (tr.final_error, -tr.gamma))
