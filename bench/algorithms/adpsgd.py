"""AD-PSGD (Lian et al. 2018, "Asynchronous Decentralized Parallel Stochastic Gradient Descent"), simulated.

Each worker i, over and over: reads its model x_i (the *snapshot*), computes a stochastic gradient there
(its compute time), draws a neighbour j uniformly from the graph, averages atomically x_i = x_j = (x_i + x_j)/2,
then steps x_i -= lr·d_i with the direction of the gradient at the snapshot (stale: neighbours may have
averaged into x_i meanwhile, which leaves the snapshot as it was), and starts again from its x_i.

When workers finish is bench/faults/events.py's event model: worker i's k-th gradient takes the straggler
model's factor of it in step-units (1 without stragglers), and the completions, in time order, are cut into
*waves* in which no worker appears twice. One runner step is one wave: the runner computes every row's
gradient at ``gradient_point()`` (the snapshots) on the step's batches, and the wave's completions are applied
one after another in their order; a worker not in the wave is still computing, so its gradient of the step
is ignored (that batch is skipped, as a worker away skips it) and its momentum stays as it was. An epoch is
``steps_per_epoch`` waves; with stragglers a wave holds fewer than n completions, so an epoch trains on fewer
batches than a synchronous method's. The wave index is ``waves`` (checkpointed, the runner's global step),
and the neighbours are a function of (seed, wave): a resumed run replays them.

Time: ``compute_units()`` is the wave's advance of the clock (its last completion minus the previous wave's),
so the run's compute time is the compute time of one gradient times the time of its last completion, where a
synchronous method waits for the slowest worker every round. Communication: an averaging sends the model both
ways between i and j, two messages of d float32 values (whole bytes on the link), one per direction. Each
counts for its sender in ``worker_bits`` and once in ``link_messages``; the paper's accounting is one payload
per message, as D-PSGD's (a model sent to k neighbours is one payload there; here each of the two messages is
its own), averaged over the n workers. A wave's communication time is the network model's time of one such
message on one link: its exchanges are taken to run in parallel and a worker that several others pick in one
wave is not serialised, a lower bound. The simulator only: the runtime of torch.distributed has rounds, not
events (refused where the communicator is not the simulated one).

On a network that loses messages (faults.drop, down; the loss schedule's round is the wave) an averaging needs
both of its messages: when either direction of the pair's link loses its message in that wave, neither end
averages (each learns it, as an acknowledgement would tell it) and i steps alone. So every averaging that
happens is the exact pairwise mean and the average of the models moves only by the steps (the ``ack`` rule;
tests/test_adpsgd.py measures it in float64). Both messages were sent and count; the lost ones are
``messages_dropped``. Workers away, pairwise gossip and late messages are refused: the waves already say who
takes part, and a late model has no place in an atomic average.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..comm import SimulatedCommunicator, Traffic
from ..compressors import make_compressor
from ..errors import BenchError
from ..faults.away import kept_rows, restore_rows
from ..faults.events import Waves
from ..faults.spec import FaultSpec
from .base import Algorithm, register


@dataclass(frozen=True)
class ADPSGDOptions:
    # the run's `faults` and `seed` settings, handed over by name (Method.settings), faults as parsed with the
    # run's settings (bench/run/resolved.py): the stragglers pace its workers and the seed draws their neighbours
    # (bench/faults/events.py); nothing else of faults is read
    faults: FaultSpec | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.faults is not None and not isinstance(self.faults, FaultSpec):
            raise BenchError("adpsgd faults is the run's faults setting (--set faults.KEY=VALUE), not an option")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise BenchError(f"adpsgd seed={self.seed!r} must be an integer >= 0")


@register
class ADPSGD(Algorithm):
    name, label = "adpsgd", "AD-PSGD"
    messages_per_round = None  # its waves: two messages per averaging (tests/test_adpsgd.py)
    Options = ADPSGDOptions
    settings = ("faults", "seed")
    keeps_average = True
    compresses = False
    fixed_graph = True  # it averages with a neighbour drawn from one graph at each event
    fault_rule = "ack"  # an averaging whose either message is lost is skipped at both ends: the average is kept
    buffers = ("snapshot", "waves")
    gossip_alone = (("none", {}, 300, 1e-9),)  # pairwise averaging, exact

    @classmethod
    def check_faults(cls, spec) -> None:
        if spec.away:
            raise BenchError("faults.active/absent/pairwise: algorithm 'adpsgd' has its own waves of who takes part "
                             "(the straggler model's event times); use faults.straggler instead")
        super().check_faults(spec)

    @classmethod
    def describe_with(cls, options) -> dict:
        """run.json's "algorithm", its faults as run.json's "faults" writes them ({} for a perfect network)."""
        out = super().describe_with(options)
        faults = options.faults
        out["options"]["faults"] = faults.to_dict() if faults is not None and faults.present else {}
        return out

    @classmethod
    def check_backend(cls, backend: str) -> None:
        if backend != "sim":
            raise BenchError("algorithm 'adpsgd' runs in the simulator only (--backend sim): its event order is "
                             "the straggler model's, not that of real processes")

    def setup(self) -> None:
        if not isinstance(self.comm, SimulatedCommunicator):
            raise BenchError("algorithm 'adpsgd' runs in the simulator only (--backend sim): its workers finish "
                             "at event times, which torch.distributed's synchronous rounds do not have")
        self.check_topology(self.comm.topology.name, self.comm.time_varying, self.options)
        self.snapshot = self.x.clone()  # where each worker's gradient under way is taken
        self.waves = 0  # waves done: the index of the next one
        links = self.comm.links().links
        neighbours = [links.dst[links.src == i] for i in range(links.n)]
        straggler = self.options.faults.straggler if self.options.faults is not None else None
        self.events = Waves(straggler, neighbours, self.options.seed)
        exact = make_compressor("none")
        d = self.x.shape[1]
        self._bits = 8.0 * math.ceil(exact.wire_bits([d]) / 8)  # one float32 model on a link, whole bytes
        self._payload = exact.paper_bits([d])
        self._units: float | None = None
        union = self.comm.union_links().links  # a message's link id in the loss schedule's union
        self._link = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(union.src, union.dst))}

    def gradient_point(self) -> torch.Tensor:
        return self.snapshot

    def compute_units(self) -> float | None:
        return self._units

    def _wave_direction(self, grad: torch.Tensor, workers: np.ndarray) -> torch.Tensor:
        """Every row's direction from its gradient at its snapshot; the local step's state (momentum) of the
        workers not in the wave is written back as it was."""
        idle = np.setdiff1d(np.arange(self.x.shape[0]), workers)
        if idle.size == 0:
            return self.local.direction(self.snapshot, grad)
        rows = torch.as_tensor(idle, device=self.x.device)
        state = self.local.state_dict()
        kept = kept_rows(state, rows, self.x.shape[0])
        d = self.local.direction(self.snapshot, grad)
        restore_rows(self.local.state_dict(), rows, kept, self.x.shape[0])
        return d

    def step(self, grad, lr: float) -> Traffic:
        wave = self.events.wave(self.waves)
        d = None if grad is None else self._wave_direction(grad, wave.workers)
        x, snapshot = self.x, self.snapshot
        lost = self.comm.faults.lost_union(self.waves) if self.comm.faults is not None else None
        dropped = 0
        for i, j in zip(wave.workers.tolist(), wave.peers.tolist()):
            if j >= 0 and lost is not None:
                missing = int(lost[self._link[(i, j)]]) + int(lost[self._link[(j, i)]])
                dropped += missing
                if missing:  # the ack rule: an averaging needs both messages, so neither end averages
                    j = -2
            if j >= 0:
                mean = x[i].add(x[j]).mul_(0.5)
                x[i], x[j] = mean, mean
            if d is not None:
                x[i].sub_(d[i], alpha=lr)
            snapshot[i] = x[i]
        self.waves += 1
        self._units = wave.advance
        done = self.comm.drain()  # nothing went through the communicator; draining keeps its round the wave's
        traffic = self._traffic(wave)
        traffic.link_lost = dropped
        done.add(traffic)
        return done

    def _traffic(self, wave) -> Traffic:
        paired = wave.peers >= 0
        exchanges = int(paired.sum())
        worker_bits = np.zeros(self.x.shape[0])
        np.add.at(worker_bits, wave.workers[paired], self._bits)
        np.add.at(worker_bits, wave.peers[paired], self._bits)
        net = self.comm.network
        time_s = net.exchange_time(np.zeros(1, dtype=np.int64), np.full(1, self._bits)) if exchanges else 0.0
        paper = 2 * exchanges * self._payload / self.x.shape[0]
        return Traffic.sent(worker_bits, paper, time_s, messages=exchanges, link_messages=2 * exchanges)
