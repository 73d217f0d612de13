"""Time-varying topologies: the gossip matrix changes every round and repeats with a period.

A builder gives, for each round k of the period, the one peer every worker averages with (a
permutation: worker i receives from ``peers[k][i]``, and sends to the worker that receives from it).
Round t uses W_{t mod τ} = (1 − w) I + w P_k with P_k that permutation's matrix and w the weight the
scheme gives a link between two workers of degree 1 (one peer a round): uniform and metropolis give
½, the one-peer exponential graph of Ying et al. (2021); maxdeg gives W_k = P_k, a permutation that
never averages, refused like a static W with eigenvalue −1.

Every W_k is doubly stochastic but not symmetric, so the static spectral gap 1 − |λ₂(W)| does not
apply. The gap reported is that of the product over one period, Π = W_{τ−1} ⋯ W_0: ρ = 1 − ‖Π − J‖₂
with J = (1/n) 11ᵀ, the factor by which τ rounds of exact gossip at least contract the distance to
the average (for a symmetric W and τ = 1 it is the usual 1 − |λ₂|). β is the largest ‖I − W_k‖₂.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import BenchError
from .base import GAP_TOL, WEIGHT_SCHEMES, check_n
from .links import Links, link_union, links_of_phases

if TYPE_CHECKING:  # scipy is imported where a sparse matrix is built: a static-topology run never loads it
    from scipy.sparse import csr_matrix


@dataclass(frozen=True)
class PeerSchedule:
    """What a time-varying builder returns: per round of one period, whom each worker receives from."""

    peers: Sequence[np.ndarray]  # peers[k][i]: the worker i averages with in round k (mod the period)
    default_weights: str


class TimeVaryingTopology:
    """A periodic sequence of gossip matrices W_0 … W_{τ−1}; round t uses ``W_at(t)``.

    It answers what a static Topology answers where that has a meaning for a sequence (n, name, kind,
    weights, spectral_gap, beta, max_degree, describe); ``W`` is not one matrix and says so."""

    grid_shape = None
    digest = None  # defined by its spec and n

    def __init__(self, n: int, peers: Sequence[np.ndarray], weights: str, *, name: str | None = None,
                 kind: str = "custom"):
        n = check_n(n, minimum=2)
        self.n, self.kind, self.weights = n, kind, weights
        self.name = name if name is not None else kind
        scheme = WEIGHT_SCHEMES.get(weights)
        if len(peers) == 0:
            raise BenchError(f"time-varying topology {self.name!r} has no rounds")
        self._peers = []
        for k, sigma in enumerate(peers):
            sigma = np.asarray(sigma)
            if sigma.shape != (n,) or not np.issubdtype(sigma.dtype, np.integer):
                raise BenchError(f"round {k} of topology {self.name!r} must name one peer per worker (n={n})")
            sigma = sigma.astype(np.int64)
            if not np.array_equal(np.sort(sigma), np.arange(n)):
                # every worker must be received from exactly once, or W_k is not doubly stochastic
                raise BenchError(f"round {k} of topology {self.name!r}: the peers are not a permutation of "
                                 f"0..{n - 1}, so W would not keep the average")
            sigma.setflags(write=False)
            self._peers.append(sigma)
        self.period = len(self._peers)
        # one link between two workers that each have one peer this round
        w = float(np.asarray(scheme(np.ones(1), np.ones(1), 1), dtype=np.float64)[0])
        if not 0.0 < w <= 1.0:
            raise BenchError(f"weights {weights!r} give the peer weight {w:.3g}; it must be in (0, 1]")
        self.peer_weight = w
        self._phases = [self._phase_matrix(sigma) for sigma in self._peers]

        pairs = np.concatenate([np.stack([np.arange(n), s], axis=1) for s in self._peers])
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        codes = np.unique(pairs.min(axis=1) * n + pairs.max(axis=1))
        self.edges: list[tuple[int, int]] = [(int(a), int(b)) for a, b in zip(*np.divmod(codes, n))]

        self.lambda2 = self._period_contraction()
        self.beta = float(max(self._distance_from_identity(sigma) for sigma in self._peers))
        self._check_spectral_gap()

    # ---- the matrices ----------------------------------------------------------------------
    def _phase_matrix(self, sigma: np.ndarray) -> csr_matrix:
        n, w = self.n, self.peer_weight
        rows = np.concatenate([np.arange(n), np.arange(n)])
        cols = np.concatenate([np.arange(n), sigma])
        values = np.concatenate([np.full(n, 1.0 - w), np.full(n, w)])
        from scipy.sparse import csr_matrix

        return csr_matrix((values, (rows, cols)), shape=(n, n))  # a fixed point sums to 1 on the diagonal

    @property
    def time_varying(self) -> bool:
        """Whether W changes from round to round (a period of one round is a static graph)."""
        return self.period > 1

    def W_at(self, t: int) -> np.ndarray:
        """W of round t (dense, read-only, built on each call: communicators build theirs once a phase)."""
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
            raise BenchError(f"round must be an integer >= 0; got {t!r}")
        W = self._phases[int(t) % self.period].toarray()
        W.setflags(write=False)
        return W

    def links_at(self, t: int) -> Links:
        """The directed links j → i of round t (worker i receives from j), by sender then receiver."""
        return links_of_phases(self)[int(t) % self.period]

    def link_union(self) -> Links:
        """Every directed link some round of the period uses; ``weight`` is the share of rounds it is used in."""
        return link_union(self)

    def peers_at(self, t: int) -> np.ndarray:
        """peers_at(t)[i]: the worker that worker i receives from in round t."""
        return self._peers[int(t) % self.period]

    @property
    def W(self) -> np.ndarray:
        raise BenchError(f"topology {self.name!r} is time-varying: its gossip matrix changes every round "
                         f"(period {self.period}); use W_at(round)")

    def product(self) -> np.ndarray:
        """Π = W_{τ−1} ⋯ W_0: what one period of exact gossip does to the workers' values."""
        out = np.eye(self.n)
        w = self.peer_weight
        for sigma in self._peers:  # W_k Π: row i becomes (1 − w) row i + w row σ(i)
            out = (1.0 - w) * out + w * out[sigma]
        return out

    # ---- spectrum ----------------------------------------------------------------------------
    def _period_contraction(self) -> float:
        """‖Π − J‖₂, 0 when one period averages exactly (the one-peer exponential graph)."""
        deviation = self.product() - 1.0 / self.n
        if not deviation.any():  # weights ½ and n = 2^τ: every entry is a dyadic fraction, exact in float
            return 0.0
        return float(np.linalg.norm(deviation, 2))

    def _distance_from_identity(self, sigma: np.ndarray) -> float:
        """‖I − W_k‖₂ = w ‖I − P‖₂; P is orthogonal (normal), so that norm is the largest |1 − e^{iθ}|
        over its eigenvalues, the L-th roots of unity of each cycle of length L."""
        seen = np.zeros(self.n, dtype=bool)
        largest = 0.0
        for start in range(self.n):
            if seen[start]:
                continue
            length, node = 0, start
            while not seen[node]:
                seen[node] = True
                node = int(sigma[node])
                length += 1
            largest = max(largest, float(abs(1.0 - np.exp(2j * np.pi * (length // 2) / length))))
        return self.peer_weight * largest

    @property
    def spectral_gap(self) -> float:
        """1 − ‖Π − J‖₂ of the product over one period (1 when a period averages exactly)."""
        return 1.0 - self.lambda2

    def _check_spectral_gap(self) -> None:
        if self.spectral_gap > GAP_TOL:
            return
        others = ", ".join(s for s in WEIGHT_SCHEMES.names() if s != self.weights)
        raise BenchError(
            f"weights {self.weights!r} on topology {self.name!r} with n={self.n} give a peer weight "
            f"{self.peer_weight:.3g}, so one period of gossip does not contract to the average (spectral gap "
            f"{max(self.spectral_gap, 0.0):.3g} of the product over a period); use another weight scheme: {others}"
        )

    # ---- graph ---------------------------------------------------------------------------------
    @property
    def num_edges(self) -> int:
        """Distinct pairs of workers that exchange in some round of the period (the union graph)."""
        return len(self.edges)

    @property
    def max_degree(self) -> int:
        """The most peers a worker sends to (or receives from) in one round: what a round costs it."""
        return int(max((s != np.arange(self.n)).max() for s in self._peers))

    @property
    def min_degree(self) -> int:
        """The fewest peers a worker has in a round (0 where a round leaves it alone)."""
        return int(min((s != np.arange(self.n)).min() for s in self._peers))

    def neighbors(self, i: int) -> list[int]:
        """Every worker that i exchanges with in some round of the period, sorted."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.n:
            raise BenchError(f"node {i!r} is not in 0..{self.n - 1} of topology {self.name!r}")
        return sorted({b if a == i else a for a, b in self.edges if i in (a, b)})

    def describe(self) -> dict:
        """As Topology.describe, with the period; spectral_gap and lambda2 are the product's."""
        union_degree = np.bincount(np.asarray(self.edges, dtype=np.int64).ravel(), minlength=self.n)
        return {
            "name": self.name,
            "kind": self.kind,
            "n": self.n,
            "num_edges": self.num_edges,
            "max_degree": self.max_degree,
            "min_degree": self.min_degree,
            "weights": self.weights,
            "spectral_gap": self.spectral_gap,
            "beta": self.beta,
            "lambda2": self.lambda2,
            "grid_shape": None,
            "digest": None,
            "self_loops": 0,
            "time_varying": self.time_varying,
            "period": self.period,
            "gap_of": "product over one period",
            "peer_weight": self.peer_weight,
            "union_max_degree": int(union_degree.max()),
        }

    def __repr__(self) -> str:
        return (f"TimeVaryingTopology({self.name!r}, n={self.n}, weights={self.weights!r}, period={self.period}, "
                f"spectral_gap={self.spectral_gap:.4g} over a period)")
