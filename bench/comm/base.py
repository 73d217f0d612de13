"""The communicator seam: the only object an algorithm talks to.

Two runtimes implement it (one process holding all workers, or torch.distributed ranks);
algorithms are written once against this interface and never learn which one runs them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from ..compressors import Message
from ..compressors.rows import RandomSource, RowStream
from ..topology.links import Links
from .traffic import Traffic


@dataclass(frozen=True, eq=False)
class LocalLinks:
    """One round's links as a process sees them: it sends on ``out`` (a contiguous range of link ids: its
    workers' outgoing links) and receives on ``into`` (ids of its workers' incoming links, in link order).
    In one process holding every worker both are all links."""

    links: Links
    lo: int
    hi: int
    out: slice
    into: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, links: Links, lo: int, hi: int) -> "LocalLinks":
        a, b = links.out_range(lo, hi)
        return cls(links, lo, hi, slice(a, b), links.into(lo, hi))

    @property
    def send_rows(self) -> np.ndarray:
        """For each link sent on, the local row (worker − lo) that sends it."""
        return self.links.src[self.out] - self.lo

    @property
    def recv_rows(self) -> np.ndarray:
        """For each link received on, the local row that receives it."""
        return self.links.dst[self.into] - self.lo

    def tensor(self, name: str, device, dtype=None) -> torch.Tensor:
        """``send_rows``, ``recv_rows`` (int64) or ``send_weight``/``recv_weight`` (the links' w_ij, ``dtype``)
        as a torch tensor on ``device``, made once."""
        key = (name, str(device), dtype)
        if key not in self._cache:
            if name in ("send_weight", "recv_weight"):
                ids = self.out if name == "send_weight" else self.into
                value = torch.tensor(self.links.weight[ids], dtype=dtype or torch.float64, device=device)
            else:
                value = torch.as_tensor(np.ascontiguousarray(getattr(self, name)), dtype=torch.int64, device=device)
            self._cache[key] = value
        return self._cache[key]

    def stream(self, source: RandomSource) -> RandomSource:
        """Compression randomness for one row per link: the same draws however the workers are split over
        processes (a process's rows are its range of outgoing links)."""
        if isinstance(source, RowStream):
            return RowStream(source.generator, self.links.E, self.out.start, self.out.stop)
        return source


class Communicator(ABC):
    """Mixing and averaging for the workers this process holds (rows of a ``[w, d]`` tensor)."""

    faults = None  # a bench.faults.FaultSchedule when the run loses messages (set by the runtime)

    def __init__(self) -> None:
        self._pending = Traffic()
        self._union: LocalLinks | None = None

    @abstractmethod
    def gossip(self, message: Message) -> torch.Tensor:
        """Send ``message`` to the graph neighbours; return ``Σ_j w_ij q_j`` for each local row i."""

    def post_gossip(self, message: Message) -> Callable[[], torch.Tensor]:
        """Start the gossip of ``message`` and return what finishes it: a call that returns what ``gossip``
        would. A method whose message does not depend on the round's gradient posts it before the gradient is
        computed, so that a runtime with real messages sends while the gradient is computed and only waits, after
        it, for what has not arrived (``--backend dist``: the round's recorded comm time is then that wait). Here
        nothing starts early: the call gossips when it is made, so the result is the same bits."""
        return lambda: self.gossip(message)

    def gossip_into(self, message: Message, out: torch.Tensor, self_shift: float = 0.0) -> torch.Tensor:
        """``out += Σ_j w_ij q_j + self_shift·q_i`` in place (a runtime may do it without temporaries)."""
        out.add_(self.gossip(message))
        if self_shift:
            out.add_(message.values, alpha=self_shift)
        return out

    @abstractmethod
    def links(self) -> LocalLinks:
        """This round's directed links, as this process sends and receives on them."""

    @property
    def time_varying(self) -> bool:
        """Whether the links change from round to round (W_t of a topology with a period > 1)."""
        return self.topology.period > 1

    def union_links(self) -> LocalLinks:
        """Every link some round of the period uses, as this process sends and receives on them: what per-link
        state (a copy per link, a basis per edge) is kept for. ``links().links.ids_in(union.links)`` maps a
        round's links into it."""
        if self._union is None:
            mine = self.links()  # the rows this process holds are every round's
            self._union = LocalLinks.of(self.topology.link_union(), mine.lo, mine.hi)
        return self._union

    def delivered(self) -> tuple[np.ndarray, np.ndarray]:
        """This round's deliveries as this process sees them: for each link it sends on (``links().out``) and
        each it receives on (``links().into``), whether the message arrives; every one on a perfect network.
        Every process computes the same (the schedule is a function of seed, round and link), so a sender
        knows what its receivers got, as an acknowledgement would tell it."""
        local = self.links()
        if self.faults is None:
            return np.ones(local.out.stop - local.out.start, bool), np.ones(len(local.into), bool)
        mask = self.faults.delivered(self.round, local.links)
        return mask[local.out], mask[local.into]

    def late(self) -> tuple[np.ndarray, np.ndarray]:
        """Like ``delivered``: for each link this process sends on and each it receives on, whether this round's
        message arrives ``faults.staleness`` rounds late (it is then among the delivered ones; the method holds
        it back until then, see bench/algorithms/link_copies.py)."""
        local = self.links()
        if self.faults is None or not self.faults.spec.delays:
            return np.zeros(local.out.stop - local.out.start, bool), np.zeros(len(local.into), bool)
        mask = self.faults.late(self.round, local.links)
        return mask[local.out], mask[local.into]

    def _faulted(self, traffic: Traffic, links) -> Traffic:
        """``traffic`` of a round on ``links`` with the run's faults counted: the messages lost and late, and
        nothing counted for what was never sent (bench/comm/accounting.py: unsent)."""
        from .accounting import unsent

        t = self.round
        traffic.link_lost = int((~self.faults.delivered(t, links)).sum())
        traffic.link_late = int(self.faults.late(t, links).sum())
        if self.faults.spec.away:
            traffic = unsent(traffic, links, self.faults.unsent(t, links), self.network.broadcast)
        return traffic

    @abstractmethod
    def exchange(self, message: Message) -> torch.Tensor:
        """A different message on every link: row k of ``message`` travels on link ``links().out.start + k``.
        Returns, for each link in ``links().into``, what its receiver decoded (``[len(into), ...]``; zeros for a
        message the run's faults lost, see ``delivered``; a late one as it was sent, see ``late``). Each copy is counted on its link; a broadcast medium
        sends each such message on its own as well."""

    @abstractmethod
    def allreduce_mean(self, x: torch.Tensor) -> torch.Tensor:
        """Exact mean over all workers of ``x`` (float32 payload), broadcast to every local row."""

    @abstractmethod
    def allgather_mean(self, message: Message) -> torch.Tensor:
        """Mean over all workers of their compressed ``message`` values, broadcast to every local row: each
        worker's encoded message reaches every other (an all-gather: compressed messages cannot be summed
        on the way, as an all-reduce sums). Per worker it sends n − 1 messages (wire bits) of the message's
        size (paper bits)."""

    @abstractmethod
    def global_mean(self, x: torch.Tensor) -> torch.Tensor:
        """Mean over all workers for measurement (consensus distance, evaluation); never accounted."""

    def describe_runtime(self, rounds: int) -> dict:
        """What this runtime measured or predicted over ``rounds`` rounds, for run.json's ``runtime``
        (nothing for a simulation: its communication time is the model's, in the metrics)."""
        return {}

    def drain(self) -> Traffic:
        """Traffic since the previous call; the algorithm returns it as what its step did."""
        done, self._pending = self._pending, Traffic()
        return done

    def _record(self, traffic: Traffic) -> None:
        self._pending.add(traffic)
