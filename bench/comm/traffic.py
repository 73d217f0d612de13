"""What a communicator carried: bits per worker, modelled time, messages per link (the communicators add to it,
the accounting computes it, the runner reads it)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Traffic:
    """What the communicator carried since the last ``drain``, summed over messages.

    ``worker_bits[i]`` is what worker i put on its links: a gossip to k neighbours is k copies of its
    message (one on a broadcast medium), a collective what it sends on its ring links. ``wire_bits`` is their
    mean over workers and ``wire_bits_max`` the most one worker sent. ``paper_bits`` is the paper's accounting,
    one payload per message whatever the degree (its MB/iteration).
    """

    wire_bits: float = 0.0
    paper_bits: float = 0.0
    comm_time_s: float = 0.0
    messages: int = 0
    worker_bits: np.ndarray | None = field(default=None, repr=False, compare=False)
    link_messages: int = 0  # messages put on directed gossip links (one per link of a gossip or an exchange)
    link_lost: int = 0  # of those, lost on the way (the run's faults); their bits were sent all the same
    link_late: int = 0  # of those, delivered rounds late (faults.late)

    @classmethod
    def sent(cls, worker_bits: np.ndarray, paper_bits: float, time_s: float, messages: int = 1,
             link_messages: int = 0) -> "Traffic":
        worker_bits = np.asarray(worker_bits, dtype=np.float64)
        return cls(float(worker_bits.mean()), paper_bits, time_s, messages, worker_bits, int(link_messages))

    @property
    def wire_bits_max(self) -> float:
        return float(self.worker_bits.max()) if self.worker_bits is not None else self.wire_bits

    def add(self, other: "Traffic") -> None:
        self.wire_bits += other.wire_bits
        self.paper_bits += other.paper_bits
        self.comm_time_s += other.comm_time_s
        self.messages += other.messages
        self.link_messages += other.link_messages
        self.link_lost += other.link_lost
        self.link_late += other.link_late
        if other.worker_bits is not None:
            self.worker_bits = other.worker_bits.copy() if self.worker_bits is None else self.worker_bits + other.worker_bits
