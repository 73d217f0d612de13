"""The directed links of one gossip round: who sends to whom, derived from the round's W.

Worker i receives from j in a round where ``W[i, j] > 0`` (i ≠ j): that is one directed link j → i, and
what a worker puts on its links is what a network carries. Links are ordered by sender, then receiver,
so that a process holding a contiguous block of workers owns a contiguous range of the outgoing ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True, eq=False)
class Links:
    n: int
    src: np.ndarray  # [E] sender of each directed link
    dst: np.ndarray  # [E] receiver
    weight: np.ndarray  # [E] w_{dst, src}: the weight the receiver gives what arrives on the link

    @classmethod
    def of(cls, W: np.ndarray) -> "Links":
        W = np.asarray(W)
        dst, src = np.nonzero(W)
        keep = dst != src
        dst, src = dst[keep], src[keep]
        order = np.lexsort((dst, src))  # by sender, then receiver
        src, dst = src[order].astype(np.int64), dst[order].astype(np.int64)
        weight = np.asarray(W[dst, src], dtype=np.float64)
        for array in (src, dst, weight):
            array.setflags(write=False)
        return cls(int(W.shape[0]), src, dst, weight)

    @property
    def E(self) -> int:
        return int(self.src.shape[0])

    @cached_property
    def out_degree(self) -> np.ndarray:
        """[n] links each worker sends on this round."""
        return np.bincount(self.src, minlength=self.n)

    def out_range(self, lo: int, hi: int) -> tuple[int, int]:
        """The links sent by workers lo..hi-1: one contiguous range [a, b) of the link order."""
        return int(np.searchsorted(self.src, lo, "left")), int(np.searchsorted(self.src, hi, "left"))

    def into(self, lo: int, hi: int) -> np.ndarray:
        """Ids of the links received by workers lo..hi-1, in link order."""
        return np.flatnonzero((self.dst >= lo) & (self.dst < hi))

    def reverse(self) -> np.ndarray:
        """For each link j → i, the id of i → j (−1 where the round has no link back)."""
        index = {(int(s), int(d)): e for e, (s, d) in enumerate(zip(self.src, self.dst))}
        return np.array([index.get((int(d), int(s)), -1) for s, d in zip(self.src, self.dst)], dtype=np.int64)

    def ids_in(self, other: "Links") -> np.ndarray:
        """For each link of this round, its id among ``other``'s links (e.g. the period's union); −1 if absent."""
        index = {(int(s), int(d)): e for e, (s, d) in enumerate(zip(other.src, other.dst))}
        return np.array([index.get((int(s), int(d)), -1) for s, d in zip(self.src, self.dst)], dtype=np.int64)



def links_of_phases(topology) -> list[Links]:
    """One Links per round of the topology's period, built once and kept on the topology."""
    cached = getattr(topology, "_links_cache", None)
    if cached is None:
        cached = [Links.of(topology.W_at(k)) for k in range(topology.period)]
        object.__setattr__(topology, "_links_cache", cached)
    return cached


def link_union(topology) -> Links:
    """The directed links of every round of the period; ``weight``: the share of rounds that use each."""
    phases = links_of_phases(topology)
    n = topology.n
    counts = np.zeros((n, n))
    for links in phases:
        counts[links.dst, links.src] += 1.0
    return Links.of(counts / len(phases))
