"""The Topology: an undirected graph plus a weight scheme, giving the gossip matrix W and its spectrum.

Every W is checked on construction, so algorithms and analysis can trust it without re-checking.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from ..errors import BenchError
from ..registry import Registry
from .links import Links, link_union, links_of_phases

# Entries of W are sums of at most n terms of size <= 1, so rounding stays far below this.
TOL = 1e-12
# eigvalsh loses about n·eps on an n×n matrix; a gap below this is "no gap", not a slow graph.
GAP_TOL = 1e-10

WeightScheme = Callable[[np.ndarray, np.ndarray, int], np.ndarray]
"""(degree of i, degree of j, max degree) per edge -> off-diagonal weight w_ij per edge."""

WEIGHT_SCHEMES: Registry[WeightScheme] = Registry("weight scheme")


@WEIGHT_SCHEMES.register("uniform")
def uniform_weights(deg_i: np.ndarray, deg_j: np.ndarray, max_degree: int) -> np.ndarray:
    # 1/(Δ+1) keeps even the busiest node's self-weight positive; on regular graphs it is 1/(deg+1).
    return np.full(deg_i.shape, 1.0 / (max_degree + 1))


@WEIGHT_SCHEMES.register("metropolis")
def metropolis_weights(deg_i: np.ndarray, deg_j: np.ndarray, max_degree: int) -> np.ndarray:
    # Needs only the two endpoint degrees and always leaves a positive self-weight (aperiodic).
    return 1.0 / (1.0 + np.maximum(deg_i, deg_j))


@WEIGHT_SCHEMES.register("maxdeg")
def maxdeg_weights(deg_i: np.ndarray, deg_j: np.ndarray, max_degree: int) -> np.ndarray:
    # The paper's form. Self-weights can be 0, so on regular bipartite graphs W has eigenvalue -1.
    return 1.0 / np.maximum(deg_i, deg_j)


def components(n: int, pairs: np.ndarray) -> np.ndarray:
    """The component of each of n nodes (a representative node's index) given the edges ``pairs [m, 2]``:
    union-find, which stops as soon as n - 1 merges have joined every node (no scipy import in a run)."""
    parent = list(range(n))

    def root(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    merges = 0
    for a, b in pairs.tolist():
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
            merges += 1
            if merges == n - 1:
                return np.zeros(n, dtype=np.int64)
    return np.array([root(a) for a in range(n)], dtype=np.int64)


@dataclass(frozen=True)
class Graph:
    """What a graph builder returns: undirected edges over nodes 0..n-1, before any weights."""

    edges: np.ndarray | Iterable[tuple[int, int]]  # pairs (i, j); order and duplicates do not matter
    default_weights: str  # the scheme docs/paper.md pairs with this kind of graph
    grid_shape: tuple[int, int] | None = None  # (rows, cols) for grids, else None
    # nodes that carry a self-loop in a multigraph construction (Margulis, the cycle-plus-inverse
    # expander): each counts once more in the degree the weight scheme sees, as in the authors' code
    loops: np.ndarray | Iterable[int] | None = None


def check_n(n: object, minimum: int = 2) -> int:
    """n as a Python int, or a BenchError when it cannot be a number of workers.

    ``minimum=1`` admits the single worker (W = [[1]]): the n = 1 baseline of speed-up studies."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise BenchError(f"number of nodes must be an integer >= {minimum}; got {n!r}")
    if n < minimum:
        raise BenchError(f"number of nodes must be >= {minimum}; got n={n}")
    return int(n)


def _edge_array(edges: np.ndarray | Iterable[tuple[int, int]], n: int, name: str) -> np.ndarray:
    """Edges as a sorted, duplicate-free int array of rows (i, j) with i < j."""
    pairs = np.asarray(list(edges) if not isinstance(edges, np.ndarray) else edges)
    if pairs.size == 0 and n == 1:
        return np.zeros((0, 2), dtype=np.int64)  # one node: no edges, W = [[1]]
    if pairs.size == 0:
        raise BenchError(f"topology {name!r} with n={n} has no edges")
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer):
        raise BenchError(f"edges of topology {name!r} must be pairs of integer node ids")
    pairs = pairs.astype(np.int64)
    bad = (pairs < 0) | (pairs >= n)
    if bad.any():
        raise BenchError(f"topology {name!r}: node {int(pairs[bad][0])} is outside 0..{n - 1} for n={n}")
    loops = pairs[:, 0] == pairs[:, 1]
    if loops.any():
        raise BenchError(f"topology {name!r}: self-loop on node {int(pairs[loops][0, 0])}; edges need two nodes")
    # One sorted integer code per pair dedupes a 500k-edge graph in milliseconds (np.unique does not).
    codes = np.sort(pairs.min(axis=1) * n + pairs.max(axis=1))
    codes = codes[np.concatenate(([True], codes[1:] != codes[:-1]))]
    return np.stack(np.divmod(codes, n), axis=1)


def _loop_mask(loops: np.ndarray | Iterable[int] | None, n: int, name: str) -> np.ndarray:
    """Per node 1 where it carries a self-loop (however many), else 0."""
    mask = np.zeros(n, dtype=np.int64)
    if loops is None:
        return mask
    nodes = np.asarray(list(loops) if not isinstance(loops, np.ndarray) else loops, dtype=np.int64).reshape(-1)
    if ((nodes < 0) | (nodes >= n)).any():
        raise BenchError(f"topology {name!r}: self-loop on a node outside 0..{n - 1} for n={n}")
    mask[nodes] = 1
    return mask


def edge_digest(n: int, pairs: np.ndarray) -> str:
    """Short hash of n and a normalised edge list (sorted pairs i < j): equal for the same graph
    however its edges were written (order, direction, duplicates, comments)."""
    payload = f"{n}:".encode() + np.ascontiguousarray(pairs, dtype="<i8").tobytes()
    return hashlib.sha256(payload).hexdigest()[:12]


class Topology:
    """Graph + mixing matrix W (float64, read-only) + the spectral quantities the theory uses."""

    def __init__(
        self,
        n: int,
        edges: np.ndarray | Iterable[tuple[int, int]],
        weights: str,
        *,
        name: str | None = None,
        kind: str = "custom",
        grid_shape: tuple[int, int] | None = None,
        external: bool = False,
        loops: np.ndarray | Iterable[int] | None = None,
    ):
        n = check_n(n, minimum=1)
        self.n = n
        self.kind = kind
        self.name = name if name is not None else kind
        self.weights = weights
        self.grid_shape = tuple(int(s) for s in grid_shape) if grid_shape is not None else None
        scheme = WEIGHT_SCHEMES.get(weights)

        pairs = _edge_array(edges, n, self.name)
        self._pairs = pairs
        self._pairs.setflags(write=False)
        self.edges: list[tuple[int, int]] = list(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))
        self.degree = np.bincount(pairs.ravel(), minlength=n).astype(np.int64)
        self.degree.setflags(write=False)
        both = np.concatenate([pairs, pairs[:, ::-1]])
        both = both[np.argsort(both[:, 0] * n + both[:, 1])]
        self._adjacency = np.split(both[:, 1], np.cumsum(self.degree)[:-1])
        self.loops = _loop_mask(loops, n, self.name)
        self.loops.setflags(write=False)
        self._check_connected()

        # A graph read from a file is named by its edges: the same path may hold another graph tomorrow.
        self.digest = edge_digest(n, pairs) if external else None

        self.W = self._mixing_matrix(scheme)
        self._check_mixing_matrix()
        self.W.setflags(write=False)

        eigenvalues = np.linalg.eigvalsh(self.W)[::-1].copy()
        eigenvalues.setflags(write=False)
        self._eigenvalues = eigenvalues
        self._check_spectral_gap()

    # ---- construction -------------------------------------------------------------------
    def _mixing_matrix(self, scheme: WeightScheme) -> np.ndarray:
        i, j = self._pairs[:, 0], self._pairs[:, 1]
        # a self-loop counts once in the degree the scheme sees (the authors' adjacency has a 1 on the
        # diagonal there), so it keeps a share of the node's own weight; no loops: the plain degree
        degree = self.degree + self.loops
        w = np.asarray(scheme(degree[i], degree[j], int(degree.max(initial=0))), dtype=np.float64)
        W = np.zeros((self.n, self.n), dtype=np.float64)
        W[i, j] = w
        W[j, i] = w
        diagonal = 1.0 - W.sum(axis=1)
        # maxdeg leaves exact zeros on the diagonal that rounding may turn into -1e-17.
        diagonal[np.abs(diagonal) < TOL] = 0.0
        W[np.diag_indices(self.n)] = diagonal
        return W

    def _check_connected(self) -> None:
        labels = components(self.n, self._pairs)
        count = len(set(labels.tolist()))
        if count > 1:
            cut_off = int(np.flatnonzero(labels != labels[0])[0])
            raise BenchError(
                f"topology {self.name!r} with n={self.n} is not connected ({count} components; "
                f"node {cut_off} cannot reach node 0); gossip needs a connected graph"
            )

    def _check_mixing_matrix(self) -> None:
        W, where = self.W, f"W of topology {self.name!r} with weights {self.weights!r}"
        if not np.isfinite(W).all():
            raise BenchError(f"{where} has non-finite entries")
        if np.abs(W - W.T).max() > TOL:
            raise BenchError(f"{where} is not symmetric")
        if np.abs(W.sum(axis=1) - 1.0).max() > TOL:
            raise BenchError(f"{where} has rows that do not sum to 1")
        if W.min() < -TOL:
            raise BenchError(f"{where} has a negative entry {W.min():.3g}; weights must be >= 0")
        allowed = np.eye(self.n, dtype=bool)
        allowed[self._pairs[:, 0], self._pairs[:, 1]] = True
        allowed[self._pairs[:, 1], self._pairs[:, 0]] = True
        if (W[~allowed] != 0.0).any():
            raise BenchError(f"{where} puts weight on a pair of nodes that is not an edge")

    def _check_spectral_gap(self) -> None:
        if self.spectral_gap > GAP_TOL:
            return
        others = ", ".join(s for s in WEIGHT_SCHEMES.names() if s != self.weights)
        worst = self._eigenvalues[1:][np.argmax(np.abs(self._eigenvalues[1:]))]
        raise BenchError(
            f"weights {self.weights!r} on topology {self.name!r} with n={self.n} give W an eigenvalue "
            f"{worst:.6g}, so gossip does not converge (spectral gap {self.spectral_gap:.3g}); "
            f"use another weight scheme: {others}"
        )

    # ---- time: a static graph is its own period of one round ----------------------------
    time_varying = False
    period = 1

    def W_at(self, t: int) -> np.ndarray:
        """The gossip matrix of round t: always W here (see TimeVaryingTopology)."""
        return self.W

    def links_at(self, t: int) -> Links:
        """The directed links j → i of round t (``W_t[i, j] > 0``), by sender then receiver."""
        return links_of_phases(self)[int(t) % self.period]

    def link_union(self) -> Links:
        """Every directed link some round of the period uses; ``weight`` is the share of rounds it is used in."""
        return link_union(self)

    # ---- graph ---------------------------------------------------------------------------
    @property
    def num_edges(self) -> int:
        return len(self.edges)

    @property
    def max_degree(self) -> int:
        return int(self.degree.max(initial=0))

    def neighbors(self, i: int) -> list[int]:
        """Nodes linked to i, sorted, without i itself."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < self.n:
            raise BenchError(f"node {i!r} is not in 0..{self.n - 1} of topology {self.name!r}")
        return self._adjacency[i].tolist()

    # ---- spectrum ------------------------------------------------------------------------
    @property
    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of W, largest first (the first is 1 for a valid W)."""
        return self._eigenvalues

    @property
    def lambda2(self) -> float:
        """Largest |λ| of W after the top eigenvalue 1: the per-step contraction of exact gossip.
        A single node has no other eigenvalue; its λ₂ is 0 (gap 1, as the complete graph)."""
        return float(np.abs(self._eigenvalues[1:]).max(initial=0.0))

    @property
    def spectral_gap(self) -> float:
        return 1.0 - self.lambda2

    @property
    def beta(self) -> float:
        """‖I − W‖₂; W is symmetric so this is max |1 − λ|."""
        return float(np.abs(1.0 - self._eigenvalues).max())

    def describe(self) -> dict:
        """Plain JSON-ready summary, as `bench topology --json` prints and run.json stores."""
        return {
            "name": self.name,
            "kind": self.kind,
            "n": self.n,
            "num_edges": self.num_edges,
            "max_degree": self.max_degree,
            "min_degree": int(self.degree.min()),
            "weights": self.weights,
            "spectral_gap": self.spectral_gap,
            "beta": self.beta,
            "lambda2": self.lambda2,
            "grid_shape": list(self.grid_shape) if self.grid_shape is not None else None,
            "digest": self.digest,
            "self_loops": int(self.loops.sum()),
            "time_varying": False,
            "period": 1,
        }

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}, n={self.n}, weights={self.weights!r}, "
            f"edges={self.num_edges}, spectral_gap={self.spectral_gap:.4g})"
        )
