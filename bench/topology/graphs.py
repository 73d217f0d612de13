"""Graph builders behind the topology spec names (``ring``, ``torus``, ``erdos-renyi:P`` ...) and make_topology.

A builder takes the parsed spec, n and a seed and returns a Graph, which Topology turns into W, or a
PeerSchedule (one peer per worker per round), which TimeVaryingTopology turns into W_0 … W_{τ−1}.

Spec syntax (none of these take an argument or options unless shown):
  ring, torus, complete, star, exponential, social      deterministic graphs
  expander           cycle on Z_p plus i -- i⁻¹ mod p (3-regular expander), n = p a prime
  margulis           Margulis–Gabber–Galil expander on Z_m × Z_m (8-regular multigraph), n = m²
  one-peer-exp       time-varying one-peer exponential graph (Ying et al. 2021), n a power of 2
  base:K             time-varying Base-(K+1) graph (Takezawa et al. 2023): <= K peers a round, exact average, any n
  random-regular:K   random K-regular graph (redrawn until connected)
  erdos-renyi:P      G(n, P) (redrawn until connected)
  file:PATH          edge list, one "i j" pair a line
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import BenchError
from ..files import read_regular_text
from ..specs import Spec, parse_fraction, parse_spec
from .base import WEIGHT_SCHEMES, Graph, Topology, check_n, components
from .kinds import TOPOLOGIES, Example, topology
from .base_graph import base_graph_matrices, factors, peers_of
from .scheduled import RoundMatrices, ScheduledTopology
from .time_varying import PeerSchedule, TimeVaryingTopology

# Random graphs are redrawn with seed+1, seed+2, ... until connected; this bounds the redraws.
MAX_TRIES = 100
SOCIAL_N = 32
INNER_EDGES = True  # base:K's option: the authors' edges inside a group in its round of phase 2


def make_topology(spec: str, n: int, weights: str | None = None, seed: int = 0) -> Topology | TimeVaryingTopology:
    """Build and validate the topology named by ``spec`` on n nodes (weights default per docs/paper.md).
    A time-varying one (``one-peer-exp``) is a TimeVaryingTopology: its round-t matrix is ``W_at(t)``."""
    parsed = parse_spec(spec)
    kind = TOPOLOGIES.get(parsed.name)
    n = check_n(n, minimum=1 if kind.single_node else 2)
    if weights is not None:
        if not isinstance(weights, str):
            known = ", ".join(WEIGHT_SCHEMES.names())
            raise BenchError(f"weight scheme must be a name; got {weights!r}; known: {known}")
        WEIGHT_SCHEMES.get(weights)  # fail on a typo before building a possibly large graph
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise BenchError(f"topology seed must be an integer; got {seed!r}")
    graph = kind.build(parsed, n, int(seed))
    if isinstance(graph, RoundMatrices):
        if weights is not None:
            raise BenchError(f"topology {parsed.text!r} fixes its own weights ({graph.weights}); "
                             f"drop weights {weights!r}")
        return ScheduledTopology(n, graph.matrices, graph.weights, name=parsed.text, kind=parsed.name)
    if isinstance(graph, PeerSchedule):
        return TimeVaryingTopology(n, graph.peers, weights if weights is not None else graph.default_weights,
                                   name=parsed.text, kind=parsed.name)
    return Topology(
        n,
        graph.edges,
        weights if weights is not None else graph.default_weights,
        name=parsed.text,
        kind=parsed.name,
        grid_shape=graph.grid_shape,
        external=kind.external,
        loops=graph.loops,
    )


def graph_digest(spec: str, n: int, weights: str | None = None, seed: int = 0) -> str | None:
    """The digest of the edges of a graph read from outside (``file:PATH``), checked as
    make_topology checks it; None for graphs that their spec and n define."""
    if not TOPOLOGIES.get(parse_spec(spec).name).external:
        return None
    return make_topology(spec, n, weights=weights, seed=seed).digest


# ---- helpers ---------------------------------------------------------------------------------
def _plain(spec: Spec) -> None:
    """Reject an argument or options on specs that take none, so typos do not pass silently."""
    spec.check_options(set())
    if spec.arg is not None:
        raise BenchError(f"topology {spec.name!r} takes no argument; got {spec.text!r}")


def _at_least(spec: Spec, n: int, minimum: int) -> None:
    if n < minimum:
        raise BenchError(f"{spec.name} needs n >= {minimum}; got n={n}")


def _circulant(n: int, offsets: list[int]) -> np.ndarray:
    """Edges i -- (i + o) mod n for each offset o; the minus direction is the same edge seen from the other end."""
    nodes = np.arange(n)
    return np.concatenate([np.stack([nodes, (nodes + o) % n], axis=1) for o in offsets])


def _nearest(n: int, admissible: Callable[[int], bool], what: str, smallest: int) -> str:
    """The admissible values just below and above n, as a refusal names them ("61 or 67")."""
    below = next((k for k in range(n - 1, smallest - 1, -1) if admissible(k)), None)
    above = next(k for k in itertools.count(max(n + 1, smallest)) if admissible(k))
    return f"nearest {what}: {below} or {above}" if below is not None else f"nearest {what}: {above}"


def _is_prime(k: int) -> bool:
    return k >= 2 and all(k % d for d in range(2, math.isqrt(k) + 1))


def _is_square(k: int) -> bool:
    return k >= 0 and math.isqrt(k) ** 2 == k


def _is_power_of_two(k: int) -> bool:
    return k >= 1 and k & (k - 1) == 0


def _without_loops(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges u -- v of a multigraph as a simple graph's edge array and the nodes that had a self-loop
    (repeated edges merge in Topology, as the authors clamp their adjacency to 1)."""
    loop = u == v
    return np.stack([u[~loop], v[~loop]], axis=1), np.unique(u[loop])


def _is_connected(n: int, edges: np.ndarray) -> bool:
    if len(edges) == 0:
        return n == 1
    return not components(n, edges).any()


# ---- deterministic graphs --------------------------------------------------------------------
def _circulant_spectrum(n: int, offsets: set[int]) -> list[float]:
    """Eigenvalues of the uniform-weight circulant on the neighbour offsets (both directions): the DFT of its row."""
    return [(1 + sum(math.cos(2 * math.pi * j * o / n) for o in offsets)) / (len(offsets) + 1) for j in range(n)]


def _exponential_offsets(n: int) -> set[int]:
    return {o % n for k in range(n.bit_length()) if (1 << k) < n for o in (1 << k, -(1 << k))}


@topology("ring", Example("ring", 3, (1.0, 1.0)), Example("ring", 5, (0.4606, 0.4607)),
          Example("ring", 8, (0.1952, 0.1953)), spectrum=lambda n, shape: _circulant_spectrum(n, {1, n - 1}))
def ring(spec: Spec, n: int, seed: int) -> Graph:
    _plain(spec)
    # n = 2 would give the single edge twice; the paper's ring has two distinct neighbours.
    _at_least(spec, n, 3)
    return Graph(_circulant(n, [1]), "uniform")


@topology("torus", Example("torus", 9, (0.6, 0.6)), Example("torus", 12, (0.4, 0.4)), Example("torus", 16, (0.4, 0.4)),
          spectrum=lambda n, shape: [(_circulant_spectrum(shape[0], {1, shape[0] - 1})[p] * 3
                                      + _circulant_spectrum(shape[1], {1, shape[1] - 1})[q] * 3 - 1) / 5
                                     for p in range(shape[0]) for q in range(shape[1])])  # cycle ⊗ cycle
def torus(spec: Spec, n: int, seed: int) -> Graph:
    _plain(spec)
    # Sides of 2 make r+1 and r-1 the same node (the 2x2 trap of docs/paper.md), so both sides need >= 3.
    a = next((a for a in range(math.isqrt(n), 2, -1) if n % a == 0), None)
    if a is None:
        raise BenchError(f"torus needs n = a·b with a, b >= 3; got n={n}")
    b = n // a
    r, c = np.divmod(np.arange(n), b)
    down = ((r + 1) % a) * b + c
    right = r * b + (c + 1) % b
    nodes = np.arange(n)
    edges = np.concatenate([np.stack([nodes, down], axis=1), np.stack([nodes, right], axis=1)])
    return Graph(edges, "uniform", grid_shape=(a, b))


@topology("complete", Example("complete", 2, (1.0, 1.0)), Example("complete", 7, (1.0, 1.0)), single_node=True,
          spectrum=lambda n, shape: [1.0] + [0.0] * (n - 1))
def complete(spec: Spec, n: int, seed: int) -> Graph:
    _plain(spec)
    return Graph(np.stack(np.triu_indices(n, k=1), axis=1), "uniform")


@topology("star", Example("star", 2, (1.0, 1.0)), Example("star", 6, (1 / 6, 1 / 6)),
          spectrum=lambda n, shape: [1.0] + [1 - 1 / n] * (n - 2) + [0.0])  # W = I − L/n, L's spectrum 0, 1…, n
def star(spec: Spec, n: int, seed: int) -> Graph:
    _plain(spec)
    leaves = np.arange(1, n)
    return Graph(np.stack([np.zeros_like(leaves), leaves], axis=1), "uniform")


@topology("exponential", Example("exponential", 2, (1.0, 1.0)), Example("exponential", 6, (0.8, 0.8)),
          Example("exponential", 16, (0.5, 0.5)),
          spectrum=lambda n, shape: _circulant_spectrum(n, _exponential_offsets(n)))
def exponential(spec: Spec, n: int, seed: int) -> Graph:
    _plain(spec)
    offsets = [1 << k for k in range(n.bit_length()) if (1 << k) < n]
    return Graph(_circulant(n, offsets), "uniform")


# 3-regular with loops at 0, 1, p − 1; at p = 11 (≡ 1 mod 5) the chords 3 -- 4 and 7 -- 8 are cycle edges
@topology("expander", Example("expander", 3, (1.0, 1.0)), Example("expander", 7, (0.2950, 0.2951)),
          Example("expander", 11, (0.1968, 0.1969)), Example("expander", 13, (0.1722, 0.1723)), note="n prime")
def expander(spec: Spec, n: int, seed: int) -> Graph:
    """The 3-regular expander on Z_p of the authors' code (``ExpanderGraph``): the cycle i -- i+1 plus
    i -- i⁻¹ mod p, with a self-loop at 0 (no inverse) and at the self-inverse 1 and p − 1.

    Where i⁻¹ = i ± 1 (p = 5 or p ≡ ±1 mod 5) that chord is a cycle edge already and the authors' W = A/3
    has rows summing to 2/3 there. Here repeated links merge and W has maxdeg's 1/max(d_i, d_j) with a loop
    counting once in the degree, as the authors weight Margulis: 1/3 on every link of a degree-3 node (their
    W exactly, wherever theirs is stochastic), 1/2 between two merged ones."""
    _plain(spec)
    if n < 3 or not _is_prime(n):
        raise BenchError(f"expander needs n = p a prime >= 3 (edges i -- i^-1 mod p); got n={n}; "
                         f"{_nearest(n, _is_prime, 'primes', 3)}")
    nodes = np.arange(n)
    inverse = np.array([0] + [pow(i, -1, n) for i in range(1, n)], dtype=np.int64)  # 0 -- 0: the authors' loop
    edges, loops = _without_loops(np.concatenate([nodes, nodes]), np.concatenate([(nodes + 1) % n, inverse]))
    # maxdeg on the loop-counted degree 3 is the authors' 1/3 on every link
    return Graph(edges, "maxdeg", loops=loops)


# m = 2 is a 4-cycle (bipartite, regular) whose loops keep maxdeg valid
@topology("margulis", Example("margulis", 4, (2 / 3, 2 / 3)), Example("margulis", 9, (0.6, 0.6)),
          Example("margulis", 25, (0.3069, 0.3070)), note="n a square")
def margulis(spec: Spec, n: int, seed: int) -> Graph:
    """Margulis–Gabber–Galil on Z_m × Z_m (node x·m + y), as networkx's ``margulis_gabber_galil_graph``
    that the authors' ``MargulisExpanderGraph`` uses: (x, y) is linked to (x ± 2y, y), (x ± (2y + 1), y),
    (x, y ± 2x), (x, y ± (2x + 1)) mod m, an 8-regular multigraph. As the authors do, repeated links
    merge, a self-loop counts once in the degree, and W has the maxdeg weights 1/max(d_i, d_j)."""
    _plain(spec)
    m = math.isqrt(n)
    if m * m != n:
        raise BenchError(f"margulis needs n = m² (a perfect square, the grid Z_m × Z_m); got n={n}; "
                         f"{_nearest(n, _is_square, 'squares', 4)}")
    x, y = np.divmod(np.arange(n), m)
    images = [((x + 2 * y) % m, y), ((x + 2 * y + 1) % m, y), (x, (y + 2 * x) % m), (x, (y + 2 * x + 1) % m)]
    u = np.concatenate([np.arange(n)] * len(images))
    v = np.concatenate([a * m + b for a, b in images])  # the four inverse maps give the same links
    edges, loops = _without_loops(u, v)
    return Graph(edges, "maxdeg", loops=loops)


# one period averages exactly: the gap of its product is 1
@topology("one-peer-exp", Example("one-peer-exp", 4, (1.0, 1.0)), Example("one-peer-exp", 16, (1.0, 1.0)),
          note="time-varying, n a power of 2", time_varying=True)
def one_peer_exponential(spec: Spec, n: int, seed: int) -> PeerSchedule:
    """Time-varying one-peer exponential graph (Ying et al. 2021): in round t worker i averages with
    (i + 2^(t mod τ)) mod n, τ = log2 n, W_t = ½(I + P_t). For n a power of 2 one period averages exactly."""
    _plain(spec)
    if not _is_power_of_two(n):
        raise BenchError(f"one-peer-exp needs n a power of 2 (period log2 n); got n={n}; "
                         f"{_nearest(n, _is_power_of_two, 'powers of 2', 2)}")
    nodes = np.arange(n)
    return PeerSchedule([(nodes + (1 << k)) % n for k in range(n.bit_length() - 1)], "uniform")


@topology("social", Example("social", SOCIAL_N, (0.0903, 0.0904)), note=f"n = {SOCIAL_N}")
def social(spec: Spec, n: int, seed: int) -> Graph:
    """Davis Southern Women: nodes 0..17 are the women, 18..31 the events E1..E14, in networkx's order."""
    _plain(spec)
    if n != SOCIAL_N:
        raise BenchError(f"social (Davis Southern Women graph) has exactly {SOCIAL_N} nodes; got n={n}")
    import networkx as nx  # here: 0.1 s of every process's start otherwise, for two graphs

    graph = nx.davis_southern_women_graph()
    # Women then events, as bipartite attribute then insertion order, so the labelling never depends on hashing.
    ordered = sorted(graph.nodes, key=lambda v: graph.nodes[v]["bipartite"])
    index = {v: k for k, v in enumerate(ordered)}
    return Graph([(index[u], index[v]) for u, v in graph.edges], "maxdeg")


# ---- random graphs ---------------------------------------------------------------------------
# a connected 2-regular graph is a cycle: the 12-ring's gap whatever the draw
def _degree(spec: Spec) -> int:
    """K of ``random-regular:K``, an integer (its range depends on n: the builder checks it)."""
    if spec.arg is None:
        raise BenchError(f"{spec.text!r} needs a degree, e.g. random-regular:4 (an integer K with 1 <= K < n)")
    try:
        return int(spec.arg)
    except ValueError:
        raise BenchError(f"degree {spec.arg!r} in {spec.text!r} is not an integer (need 1 <= K < n)") from None


@topology("random-regular", Example("random-regular:3", 10, (0.05, 0.6)),
          Example("random-regular:2", 12, (0.0893, 0.0894)), usage="random-regular:K", arg=_degree)
def random_regular(spec: Spec, n: int, seed: int) -> Graph:
    spec.check_options(set())
    k = _degree(spec)
    if not 1 <= k < n:
        raise BenchError(f"degree K={k} in {spec.text!r} must satisfy 1 <= K < n={n}")
    if (n * k) % 2:
        raise BenchError(f"no {k}-regular graph on n={n} nodes exists: n·K = {n * k} is odd")
    if k == 1 and n > 2:
        raise BenchError(f"random-regular:1 is a perfect matching, never connected for n={n}; use K >= 2")
    import networkx as nx

    for attempt in range(MAX_TRIES):
        graph = nx.random_regular_graph(k, n, seed=seed + attempt)
        edges = np.array(graph.edges, dtype=np.int64).reshape(-1, 2)
        if _is_connected(n, edges):
            return Graph(edges, "uniform")
    raise BenchError(
        f"no connected {k}-regular graph on n={n} in {MAX_TRIES} draws (seeds {seed}..{seed + MAX_TRIES - 1}); "
        f"use a larger K than {k}"
    )


def _probability(spec: Spec) -> float:
    return parse_fraction(spec, "edge probability")


# at P = 1 every pair is linked: metropolis gives 1/n everywhere, exact averaging
@topology("erdos-renyi", Example("erdos-renyi:0.4", 12, (0.05, 0.8)), Example("erdos-renyi:1", 5, (1.0, 1.0)),
          usage="erdos-renyi:P", arg=_probability)
def erdos_renyi(spec: Spec, n: int, seed: int) -> Graph:
    """G(n, P): each pair linked independently with probability P, drawn with numpy (fast at n = 1024)."""
    spec.check_options(set())
    p = _probability(spec)
    pairs = np.stack(np.triu_indices(n, k=1), axis=1)
    for attempt in range(MAX_TRIES):
        rng = np.random.default_rng(seed + attempt)
        edges = pairs[rng.random(len(pairs)) < p]
        if _is_connected(n, edges):
            return Graph(edges, "metropolis")
    raise BenchError(
        f"edge probability P={spec.arg} is too small for n={n}: no connected graph in {MAX_TRIES} draws; "
        f"use P above about ln(n)/n = {math.log(n) / n:.3g}"
    )


# ---- time-varying with several peers a round ------------------------------------------------------------
# one period averages exactly (the gap of its product is 1 up to rounding): 6 = 2·3 and 10 = 2·5 need the
# split, 7 and 25 the base-(k+1) groups, 9 with K = 2 is a hyper-hypercube
@topology("base", Example("base:1", 6, (1.0, 1.0)), Example("base:1", 7, (1.0, 1.0)), Example("base:2", 9, (1.0, 1.0)),
          Example("base:2", 10, (1.0, 1.0)), Example("base:3", 25, (1.0, 1.0)), usage="base:K",
          note="time-varying Base-(K+1) graph, at most K peers a round, any n (inner_edges=false: the authors' "
               "variant without the edges inside a group in its round of phase 2)", time_varying=True,
          revision=lambda spec, n: int(factors(n, peers_of(spec)) is None),  # a hyper-hypercube never changed
          arg=peers_of, flags=(("inner_edges", INNER_EDGES),))
def base_graph(spec: Spec, n: int, seed: int) -> RoundMatrices:
    """Base-(K+1) graph (Takezawa et al. 2023; bench/topology/base_graph.py): every worker has at most K peers
    a round and the product over one period is exactly 11ᵀ/n, for any n."""
    k = peers_of(spec)
    return RoundMatrices(base_graph_matrices(n, k, spec.option_bool("inner_edges", INNER_EDGES)), "base-graph")


# ---- user-supplied graphs --------------------------------------------------------------------
# a connected, irregular, non-bipartite 6-node graph (a triangle with a tail and a pendant)
@topology("file", Example("file:{path}", 6, (0.2598, 0.2599),
                          "# a graph\n0 1\n1 2\n2 0\n2 3   # tail\n3 4\n\n4 5\n1 5\n"),
          usage="file:PATH", note="an edge list", external=True)
def edge_list_file(spec: Spec, n: int, seed: int) -> Graph:
    """Edge list: one ``i j`` pair of 0-based nodes a line; ``#`` starts a comment; each edge once or both ways."""
    spec.check_options(set())
    if spec.arg is None:
        raise BenchError(f"{spec.text!r} needs a path, e.g. file:edges.txt (one 'i j' pair a line)")
    path = Path(spec.arg).expanduser()
    try:
        text = read_regular_text(path)
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise BenchError(f"cannot read edge list {str(path)!r}: {reason}") from None
    edges: list[tuple[int, int]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError
            i, j = int(fields[0]), int(fields[1])
        except ValueError:
            raise BenchError(f"{path}:{number}: expected two node numbers 'i j', got {raw.strip()!r}") from None
        for node in (i, j):
            if not 0 <= node < n:
                raise BenchError(f"{path}:{number}: node {node} is out of range 0..{n - 1} for n={n}")
        if i == j:
            raise BenchError(f"{path}:{number}: self-loop {i} {j}; an edge needs two different nodes")
        edges.append((i, j))
    if not edges:
        raise BenchError(f"edge list {path} has no edges")
    count = 1 + max(max(edge) for edge in edges)
    if count != n:
        raise BenchError(f"edge list {path} has {count} nodes (0..{count - 1}) but n={n}")
    return Graph(edges, "metropolis")
