"""Time-varying topologies given as explicit per-round gossip matrices, where a worker may have several peers
a round (the Base-(k+1) graph, bench/topology/base_graph.py), unlike the one-peer permutations of time_varying.py.

Each round's W_k must be symmetric, non-negative and stochastic (so doubly stochastic). As for every
time-varying topology, the reported gap is that of the product over one period, 1 − ‖W_{τ−1} ⋯ W_0 − J‖₂, and
β is the largest ‖I − W_k‖₂; every round here is a disjoint union of small blocks, so β is computed per block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import BenchError
from .base import GAP_TOL, TOL, check_n
from .time_varying import TimeVaryingTopology

if TYPE_CHECKING:  # scipy is imported where a sparse matrix is built: a static-topology run never loads it
    from scipy.sparse import csr_matrix


@dataclass(frozen=True)
class RoundMatrices:
    """What a builder returns for a time-varying topology with several peers a round: W_k per round."""

    matrices: Sequence  # one [n, n] matrix per round of the period (dense or scipy sparse)
    weights: str  # how describe() names the weights, which the construction fixes (no weight scheme applies)


class ScheduledTopology(TimeVaryingTopology):
    """A periodic sequence of symmetric doubly stochastic W_0 … W_{τ−1}; round t uses ``W_at(t)``."""

    def __init__(self, n: int, matrices: Sequence, weights: str, *, name: str | None = None, kind: str = "custom"):
        n = check_n(n, minimum=2)
        self.n, self.kind, self.weights = n, kind, weights
        self.name = name if name is not None else kind
        if len(matrices) == 0:
            raise BenchError(f"time-varying topology {self.name!r} has no rounds")
        self._phases = [self._checked(k, W) for k, W in enumerate(matrices)]
        self.period = len(self._phases)
        self.peer_weight = None  # no single peer weight: the construction sets each link's own

        codes = np.unique(np.concatenate([self._pair_codes(W) for W in self._phases]))
        self.edges: list[tuple[int, int]] = [(int(a), int(b)) for a, b in zip(*np.divmod(codes, n))]
        if not self.edges:
            raise BenchError(f"time-varying topology {self.name!r} with n={n} never links two workers")
        self.lambda2 = self._period_contraction()
        self.beta = float(max(self._distance_from_identity(W) for W in self._phases))
        self._check_spectral_gap()

    # ---- construction ------------------------------------------------------------------------
    def _checked(self, k: int, W) -> csr_matrix:
        from scipy.sparse import csr_matrix

        where = f"round {k} of topology {self.name!r}"
        W = csr_matrix(W, dtype=np.float64)
        if W.shape != (self.n, self.n):
            raise BenchError(f"{where} must be an {self.n}×{self.n} matrix; got {W.shape}")
        W.eliminate_zeros()
        if not np.isfinite(W.data).all():
            raise BenchError(f"{where} has non-finite entries")
        if W.nnz and W.data.min() < 0:
            raise BenchError(f"{where} has a negative entry {W.data.min():.3g}; weights must be >= 0")
        if W.nnz and abs(W - W.T).max() > TOL:
            raise BenchError(f"{where} is not symmetric")
        if np.abs(np.asarray(W.sum(axis=1)).ravel() - 1.0).max() > TOL:
            raise BenchError(f"{where} has rows that do not sum to 1, so W would not keep the average")
        return W

    def _pair_codes(self, W: csr_matrix) -> np.ndarray:
        from scipy.sparse import triu

        upper = triu(W, k=1).tocoo()
        return upper.row.astype(np.int64) * self.n + upper.col

    # ---- the matrices --------------------------------------------------------------------------
    def peers_at(self, t: int) -> np.ndarray:
        raise BenchError(f"topology {self.name!r} gives a worker several peers a round; use links_at(round)")

    def product(self) -> np.ndarray:
        """Π = W_{τ−1} ⋯ W_0 (dense)."""
        out = np.eye(self.n)
        for W in self._phases:
            out = W @ out
        return np.asarray(out)

    def _distance_from_identity(self, W: csr_matrix) -> float:
        """‖I − W‖₂ = max |1 − λ| over W's eigenvalues (W symmetric), found block by block: the connected
        components of a round's links are its independent blocks."""
        from scipy.sparse.csgraph import connected_components

        count, labels = connected_components(W, directed=False)
        order = np.argsort(labels, kind="stable")
        blocks = np.split(order, np.cumsum(np.bincount(labels, minlength=count))[:-1])
        largest = 0.0
        for block in blocks:
            if len(block) > 1:
                eigenvalues = np.linalg.eigvalsh(W[block][:, block].toarray())
                largest = max(largest, float(np.abs(1.0 - eigenvalues).max()))
        return largest

    def _check_spectral_gap(self) -> None:
        if self.spectral_gap > GAP_TOL:
            return
        raise BenchError(f"topology {self.name!r} with n={self.n}: one period of gossip does not contract to the "
                         f"average (spectral gap {max(self.spectral_gap, 0.0):.3g} of the product over a period)")

    # ---- graph ---------------------------------------------------------------------------------
    def _peer_counts(self, W: csr_matrix) -> np.ndarray:
        off = np.diff(W.indptr) - (W.diagonal() != 0)
        return off.astype(np.int64)

    @property
    def max_degree(self) -> int:
        """The most peers a worker has in one round: what a round costs it."""
        return int(max(self._peer_counts(W).max() for W in self._phases))

    @property
    def min_degree(self) -> int:
        """The fewest peers a worker has in a round (0 where a round leaves it alone)."""
        return int(min(self._peer_counts(W).min() for W in self._phases))
