"""The communicator seam: the only object an algorithm talks to.

Two runtimes implement it (one process holding all workers, or torch.distributed ranks);
algorithms are written once against this interface and never learn which one runs them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from ..compressors import Message


@dataclass
class Traffic:
    """What the communicator carried since the last ``drain``: per worker, summed over messages.

    ``wire_bits``/``paper_bits`` count each broadcast message once (the payload size, as the
    paper's MB/iteration does); the cost of sending it to every neighbour is in ``comm_time_s``.
    """

    wire_bits: float = 0.0
    paper_bits: float = 0.0
    comm_time_s: float = 0.0
    messages: int = 0

    def add(self, other: "Traffic") -> None:
        self.wire_bits += other.wire_bits
        self.paper_bits += other.paper_bits
        self.comm_time_s += other.comm_time_s
        self.messages += other.messages


class Communicator(ABC):
    """Mixing and averaging for the workers this process holds (rows of a ``[w, d]`` tensor)."""

    def __init__(self) -> None:
        self._pending = Traffic()

    @abstractmethod
    def gossip(self, message: Message) -> torch.Tensor:
        """Send ``message`` to the graph neighbours; return ``Σ_j w_ij q_j`` for each local row i."""

    def gossip_into(self, message: Message, out: torch.Tensor, self_shift: float = 0.0) -> torch.Tensor:
        """``out += Σ_j w_ij q_j + self_shift·q_i`` in place (a runtime may do it without temporaries)."""
        out.add_(self.gossip(message))
        if self_shift:
            out.add_(message.values, alpha=self_shift)
        return out

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
