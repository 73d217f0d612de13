"""Which directed link delivers in which round: a pure function of the run's seed, the round and the link,
so that the simulator and every torch.distributed process compute the same losses, a resumed run the same
ones again, and a process asks for any round in any order.

Each round t has its own generator, seeded by (SALT, seed, t), drawing one uniform per *unit*: a directed
link of the period's union of links, or, with ``symmetric``, an undirected edge (both directions lost
together). A link of a round is found in the union by its endpoints, so a time-varying topology keeps each
link's draws. Bernoulli losses read the round's draws directly. Gilbert-Elliott is a Markov chain per unit
whose state at t depends on every round before: the chain is run forward from round 0 and its last state
kept, so asking rounds in order costs one step each (a run), and an earlier round replays from 0."""
from __future__ import annotations

import numpy as np

from ..topology.links import Links
from .spec import FaultSpec

SALT = 0x5EED_FA17  # keeps these draws apart from every other stream of the run
AWAY_SALT = 0xAB5E_17  # the draws of partial activation, apart from the losses' (adding one changes neither)
PAIR_SALT = 0x9A1_2ED6E  # the edge of each round of pairwise gossip
LATE_SALT = 0x1A7E_D1A7  # which delivered messages arrive late


class FaultSchedule:
    def __init__(self, spec: FaultSpec, union: Links, seed: int):
        self.spec, self.union, self.seed = spec, union, int(seed)
        if spec.symmetric:
            pairs = {(min(s, d), max(s, d)) for s, d in zip(union.src.tolist(), union.dst.tolist())}
            edges = {pair: k for k, pair in enumerate(sorted(pairs))}
            self._unit = np.array([edges[(min(s, d), max(s, d))] for s, d in
                                   zip(union.src.tolist(), union.dst.tolist())], dtype=np.int64)
            self.units = len(edges)
        else:
            self._unit = np.arange(union.E, dtype=np.int64)
            self.units = union.E
        lo, hi = np.minimum(union.src, union.dst), np.maximum(union.src, union.dst)
        self._edges = sorted(set(zip(lo.tolist(), hi.tolist())))  # undirected, for pairwise gossip
        self._chain: tuple[int, np.ndarray] | None = None  # (round, bad state per unit) of Gilbert-Elliott
        self._last: tuple[int, np.ndarray] | None = None  # the round asked last and its losses (asked twice a round)
        self._ids: dict[int, tuple[Links, np.ndarray]] = {}  # a round's Links -> its links' ids in the union

    def _draws(self, t: int) -> np.ndarray:
        return np.random.default_rng([SALT, self.seed, int(t)]).random(self.units)

    def _bad(self, t: int) -> np.ndarray:
        """Gilbert-Elliott's state per unit at round t (True: in a loss burst)."""
        spec = self.spec
        p_gb, p_bg = spec.p_good_to_bad, 1.0 / spec.burst
        if self._chain is None or self._chain[0] > t:
            stationary = p_gb / (p_gb + p_bg)
            self._chain = (0, self._draws(0) < stationary)
        k, bad = self._chain
        while k < t:
            k += 1
            u = self._draws(k)
            bad = np.where(bad, u >= p_bg, u < p_gb)
        self._chain = (k, bad)
        return bad

    def lost_union(self, t: int) -> np.ndarray:
        """[E of the union] True where the link loses its message of round t (read-only)."""
        if self._last is not None and self._last[0] == t:
            return self._last[1]
        lost = self._lost(t)
        lost.setflags(write=False)
        self._last = (t, lost)
        return lost

    def pair(self, t: int) -> tuple[int, int]:
        """The edge (i < j) that gossips in round t of pairwise gossip, uniform over the graph's edges."""
        k = int(np.random.default_rng([PAIR_SALT, self.seed, int(t)]).integers(len(self._edges)))
        return self._edges[k]

    def away(self, t: int) -> np.ndarray:
        """[n] True for the workers that sit out round t (partial activation, churn, pairwise gossip)."""
        spec, n = self.spec, self.union.n
        out = np.zeros(n, dtype=bool)
        if spec.pairwise:
            out[:] = True
            out[list(self.pair(t))] = False
        if spec.active < 1:
            out |= np.random.default_rng([AWAY_SALT, self.seed, int(t)]).random(n) >= spec.active
        for a in spec.absent:
            if a.start <= t < a.stop:
                out[a.worker] = True
        return out

    def unsent_union(self, t: int) -> np.ndarray:
        """[E of the union] True where nothing is put on the link in round t: its sender sits the round out, or
        (pairwise gossip) the link is not the round's edge. Such a message is counted neither as sent nor lost."""
        spec = self.spec
        if not spec.away:
            return np.zeros(self.union.E, dtype=bool)
        idle = self.away(t)[self.union.src]
        if spec.pairwise:
            i, j = self.pair(t)
            src, dst = self.union.src, self.union.dst
            idle |= ~(((src == i) & (dst == j)) | ((src == j) & (dst == i)))
        return idle

    def late_union(self, t: int) -> np.ndarray:
        """[E of the union] True where the round-t message arrives ``staleness`` rounds late (never a lost one)."""
        if not self.spec.delays:
            return np.zeros(self.union.E, dtype=bool)
        draws = np.random.default_rng([LATE_SALT, self.seed, int(t)]).random(self.union.E)
        return (draws < self.spec.late) & ~self.lost_union(t)

    def _lost(self, t: int) -> np.ndarray:
        spec = self.spec
        lost = np.zeros(self.union.E, dtype=bool)
        if spec.drop > 0:
            unit_lost = self._bad(t) if spec.drop_model == "gilbert-elliott" else self._draws(t) < spec.drop
            lost |= unit_lost[self._unit]
        if spec.away:  # nothing reaches a worker that is away, and it sends nothing
            gone = self.away(t)
            lost |= gone[self.union.src] | gone[self.union.dst]
        for outage in spec.down:
            if outage.start <= t < outage.stop:
                a, b = np.minimum(self.union.src, self.union.dst), np.maximum(self.union.src, self.union.dst)
                lost |= (a == outage.a) & (b == outage.b)
        return lost

    def ids(self, links: Links) -> np.ndarray:
        """[links.E] each of a round's links' position in the union."""
        known = self._ids.get(id(links))
        if known is None or known[0] is not links:  # keyed by identity: a runtime keeps one Links per phase
            known = self._ids[id(links)] = (links, links.ids_in(self.union))
        if (known[1] < 0).any():
            raise ValueError("a link of the round is not in the schedule's union of links")
        return known[1]

    def delivered(self, t: int, links: Links) -> np.ndarray:
        """[links.E] True where the round-t link delivers, on time or late (``links``: that round's links)."""
        return ~self.lost_union(t)[self.ids(links)]

    def late(self, t: int, links: Links) -> np.ndarray:
        """[links.E] True where the round-t link's message arrives late."""
        return self.late_union(t)[self.ids(links)]

    def unsent(self, t: int, links: Links) -> np.ndarray:
        """[links.E] True where nothing is sent on the round-t link (see unsent_union)."""
        return self.unsent_union(t)[self.ids(links)]
