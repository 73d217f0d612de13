"""Mathematics of the topologies: W doubly stochastic on the graph's support, PAPER.md gaps, closed forms."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from bench.errors import BenchError
from bench.specs import parse_spec
from bench.topology import (TOPOLOGIES, WEIGHT_SCHEMES, Example, TimeVaryingTopology, Topology, graph_digest,
                            help_text, make_topology)

# Every registered topology's examples (bench/topology/graphs.py declares them with their gaps), so a new
# topology is tested without editing a list; some are regular bipartite (ring 8, torus 16, complete 2, star 2),
# where maxdeg must be rejected.
EXAMPLES = [example for name in TOPOLOGIES.names() for example in TOPOLOGIES.get(name).examples]
STATIC = [e for e in EXAMPLES if not TOPOLOGIES.get(parse_spec(e.spec).name).time_varying]


def example_id(example: Example) -> str:
    return f"{example.spec.partition(':')[0] if example.file_text else example.spec}-{example.n}"


def built(example: Example, tmp_path, weights=None):
    """The example's topology; a kind read from a file gets the example's text written to ``{path}``."""
    spec = example.spec
    if example.file_text is not None:
        path = tmp_path / "edges.txt"
        path.write_text(example.file_text)
        spec = spec.format(path=path)
    return spec, make_topology(spec, example.n, weights=weights)


def as_networkx(topology: Topology) -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(range(topology.n))
    graph.add_edges_from(topology.edges)
    return graph


def expected_weight(scheme: str, d_i: int, d_j: int, max_degree: int) -> float:
    return {"uniform": 1 / (max_degree + 1), "metropolis": 1 / (1 + max(d_i, d_j)), "maxdeg": 1 / max(d_i, d_j)}[scheme]


def test_every_registered_topology_declares_itself_and_the_help_lists_it():
    text = help_text()
    for name in TOPOLOGIES.names():
        kind = TOPOLOGIES.get(name)
        assert kind.examples and kind.usage.partition(":")[0] == name
        assert all(parse_spec(e.spec).name == name and 0 < e.gap[0] <= e.gap[1] <= 1 for e in kind.examples)
        assert (f"{kind.usage} ({kind.note})" if kind.note else kind.usage) in text
    assert "\n" not in text
    assert set(WEIGHT_SCHEMES.names()) == {"uniform", "metropolis", "maxdeg"}


def rounds_of(topology) -> list[np.ndarray]:
    return [topology.W_at(t) for t in range(topology.period)] if topology.time_varying else [topology.W]


@pytest.mark.parametrize("example, scheme", [(e, None) for e in EXAMPLES] + [
    (e, scheme) for scheme in ("uniform", "metropolis", "maxdeg") for e in STATIC],
    ids=lambda value: example_id(value) if isinstance(value, Example) else str(value))
def test_every_example_is_a_doubly_stochastic_gossip_on_its_graph_with_its_stated_gap(example, scheme, tmp_path):
    """Each example on its default weights and (a static one) on every scheme: every round's W non-negative,
    doubly stochastic and (but one-peer rounds) symmetric, its support the graph's edges with the scheme's weights,
    the spectrum, gap and β as computed independently, exact gossip contracting by 1 − gap a round (a period),
    and the gap in the range the example states; a time-varying example whose gap is 1 averages in one period
    exactly, and not a round earlier."""
    kind = TOPOLOGIES.get(parse_spec(example.spec).name)
    spec, graph_only = built(example, tmp_path)
    n, graph = example.n, as_networkx(graph_only)
    # a self-loop keeps a node's self-weight positive under maxdeg too (Margulis, expander)
    regular_bipartite = (len(set(dict(graph.degree).values())) == 1 and nx.is_bipartite(graph)
                         and not graph_only.loops.any())
    try:
        topology = make_topology(spec, n, weights=scheme)
    except BenchError as error:
        # Self-weights vanish only under maxdeg on a regular graph; bipartite then gives eigenvalue -1.
        assert scheme == "maxdeg" and regular_bipartite, str(error)
        assert "maxdeg" in str(error) and "another weight scheme" in str(error)
        return
    assert not (scheme == "maxdeg" and regular_bipartite)
    assert topology.n == n and topology.name == spec and topology.kind == kind.name
    assert isinstance(topology, TimeVaryingTopology) is kind.time_varying
    rounds = rounds_of(topology)
    for W in rounds:
        assert W.shape == (n, n) and W.dtype == np.float64 and W.min() >= 0
        assert np.abs(W.sum(axis=0) - 1).max() <= 1e-12 and np.abs(W.sum(axis=1) - 1).max() <= 1e-12
        assert kind.name == "one-peer-exp" or np.abs(W - W.T).max() <= 1e-12
        with pytest.raises(ValueError):
            W[0, 0] = 0.5
    assert topology.beta == pytest.approx(max(np.linalg.norm(np.eye(n) - W, 2) for W in rounds), abs=1e-9)
    x = np.random.default_rng(0).standard_normal(n)
    y = x.copy()
    for W in rounds:
        y = W @ y
    assert np.linalg.norm(y - x.mean()) <= (1 - topology.spectral_gap) * np.linalg.norm(x - x.mean()) + 1e-12
    summary = json.loads(json.dumps(topology.describe()))
    assert summary["n"] == n and summary["spectral_gap"] == pytest.approx(topology.spectral_gap)
    assert summary["time_varying"] is kind.time_varying
    if scheme is None:
        low, high = example.gap
        assert low - 1e-12 <= topology.spectral_gap <= high + 1e-12, topology.spectral_gap
    if kind.time_varying:
        if example.gap == (1.0, 1.0):
            product = np.linalg.multi_dot([np.eye(n), *rounds[::-1]])
            assert np.abs(product - 1 / n).max() <= 1e-12 and topology.spectral_gap == pytest.approx(1, abs=1e-12)
            early = np.linalg.multi_dot([np.eye(n), np.eye(n), *rounds[-2::-1]])
            assert topology.period == 1 or np.abs(early - 1 / n).max() > 1e-6
        return
    # a static W: its support is the graph's edges, weighted by the scheme
    W, deg, m = topology.W, topology.degree, topology.num_edges
    off = ~np.eye(n, dtype=bool)
    assert np.array_equal((W > 0) & off, nx.to_numpy_array(graph, nodelist=range(n)) > 0) and nx.is_connected(graph)
    seen = deg + topology.loops  # the degree the scheme sees: a self-loop counts once
    assert topology.loops.min() >= 0 and topology.loops.max() <= 1
    for i, j in topology.edges:
        assert i < j
        assert W[i, j] == pytest.approx(expected_weight(topology.weights, seen[i], seen[j], seen.max()), abs=1e-15)
    assert topology.edges == sorted(set(topology.edges))
    assert deg.sum() == 2 * m and topology.max_degree == deg.max()
    assert all(topology.neighbors(i) == sorted(graph.neighbors(i)) for i in range(n))
    assert summary["num_edges"] == m and summary["min_degree"] == deg.min()
    reference = np.sort(np.linalg.eigvals(W).real)[::-1]
    assert np.allclose(topology.eigenvalues, reference, atol=1e-9)
    assert topology.lambda2 == pytest.approx(np.abs(reference[1:]).max(), abs=1e-9)
    assert topology.spectral_gap == pytest.approx(1 - topology.lambda2, abs=1e-15) and topology.spectral_gap > 0
    if kind.spectrum is not None and scheme is None:  # the kind's closed form
        closed = sorted(kind.spectrum(n, topology.grid_shape), reverse=True)
        assert np.allclose(topology.eigenvalues, closed, rtol=0, atol=1e-12)


def test_a_kind_declares_what_make_topology_asks_of_it(tmp_path):
    """Only a single-node kind takes n = 1; only an external one is named by the digest of its edges."""
    for name in TOPOLOGIES.names():
        kind = TOPOLOGIES.get(name)
        example = kind.examples[0]
        spec, topology = built(example, tmp_path)
        assert (graph_digest(spec, example.n) is None) is (topology.digest is None) is not kind.external
        if not kind.single_node and not kind.external:
            with pytest.raises(BenchError, match=r"number of nodes must be >= 2; got n=1"):
                make_topology(example.spec, 1)
    for single in (name for name in TOPOLOGIES.names() if TOPOLOGIES.get(name).single_node):
        # no second eigenvalue: exact gossip is done after one round, as on any complete graph
        topology = make_topology(single, 1)
        assert topology.W.tolist() == [[1.0]] and topology.num_edges == 0 and topology.neighbors(0) == []
        assert (topology.spectral_gap, topology.lambda2, topology.beta, topology.max_degree) == (1.0, 0.0, 0.0, 0)


def test_the_paper_s_graphs_have_its_gaps_and_weights():
    """PAPER.md's gaps (rounded as printed) and the social graph's shape (the ring's and torus' uniform weights:
    test_every_example_is_a_doubly_stochastic_gossip_on_its_graph_with_its_stated_gap)."""
    for spec, n, gap in [("ring", 4, 0.667), ("ring", 8, 0.195), ("ring", 16, 0.051), ("ring", 36, 0.010),
                         ("ring", 64, 0.003), ("torus", 16, 0.4), ("torus", 36, 0.2), ("torus", 64, 0.117),
                         ("social", 32, 0.090)]:
        assert round(make_topology(spec, n).spectral_gap, 3) == pytest.approx(gap, abs=1e-12), (spec, n)
    social = make_topology("social", 32)
    assert (social.num_edges, social.max_degree, social.weights) == (89, 14, "maxdeg")
    assert social.spectral_gap == pytest.approx(0.0903, abs=5e-5)
    # Women (0..17) only meet events (18..31): the relabelling keeps the two sides apart.
    assert all(i < 18 <= j for i, j in social.edges)


def test_neighbours_and_self_weights_by_hand():
    # (spec, n, node, its neighbours, its self-weight); torus 3×6: node 8 = row 1, column 2
    for spec, n, node, neighbours, self_weight in [
            ("exponential", 16, 0, [1, 2, 4, 8, 12, 14, 15], 1 / 8), ("star", 6, 0, [1, 2, 3, 4, 5], 1 / 6),
            ("star", 6, 3, [0], 5 / 6), ("torus", 18, 8, [2, 7, 9, 14], 1 / 5), ("ring", 7, 0, [1, 6], 1 / 3)]:
        topology = make_topology(spec, n)
        assert topology.neighbors(node) == neighbours and topology.W[node, node] == pytest.approx(self_weight)
    assert make_topology("torus", 18).grid_shape == (3, 6) and make_topology("torus", 20).grid_shape == (4, 5)
    summary = make_topology("torus", 12).describe()
    assert {"name", "kind", "max_degree", "weights", "beta", "lambda2"} <= set(summary)
    # torus 3×4: λ_min = (1 - 1 - 2)/5, so β = 1 - λ_min = 1.4
    assert (summary["grid_shape"], summary["num_edges"], summary["beta"]) == ([3, 4], 24, pytest.approx(1.4, abs=1e-12))


def test_edge_list_file_reproduces_ring(tmp_path):
    n = 10
    lines = ["# a ring, listed backwards and both ways", ""]
    lines += [f"{(i + 1) % n} {i}" for i in reversed(range(n))] + [f"{i} {(i + 1) % n}  # again" for i in range(n)]
    path = tmp_path / "ring.txt"
    path.write_text("\n".join(lines) + "\n")
    from_file, ring = make_topology(f"file:{path}", n), make_topology("ring", n)
    assert from_file.weights == "metropolis" and from_file.kind == "file"
    assert from_file.edges == ring.edges
    assert np.array_equal(from_file.W, ring.W)


# erdos-renyi:0.1 on 40 nodes: a single draw is usually disconnected; the graph is drawn again until connected
@pytest.mark.parametrize("spec, n", [("erdos-renyi:0.3", 20), ("erdos-renyi:0.1", 40), ("random-regular:3", 16),
                                     ("random-regular:4", 33)])
def test_random_graphs_reproducible_and_connected(spec, n):
    first, again, other = (make_topology(spec, n, seed=s) for s in (7, 7, 8))
    assert first.edges == again.edges and np.array_equal(first.W, again.W)
    assert first.edges != other.edges
    assert nx.is_connected(as_networkx(first))
    if spec.startswith("random-regular"):
        assert set(first.degree.tolist()) == {int(spec.split(":")[1])}


@pytest.mark.parametrize("spec, n, weights, message", [  # a line a kind
    ("torus", 8, None, "n=8"), ("torus", 4, None, "n=4"), ("torus", 7, None, "a, b >= 3"),
    ("torus,wrap=no", 9, None, "'wrap'"),
    ("ring", 2, None, "n=2"), ("ring", 1, None, "n=1"), ("ring:4", 8, None, "'ring:4'"),
    ("ring", 8, "lazy", "'lazy'.*uniform"), ("hypercube", 8, None, "'hypercube'.*known: ring"),
    ("social", 31, None, "n=31"), ("complete", 1.5, None, "1.5"),
    ("erdos-renyi:0", 10, None, "probability 0 in"), ("erdos-renyi:1.5", 10, None, "probability 1.5 in"),
    ("erdos-renyi:x", 10, None, "'x'"), ("erdos-renyi", 10, None, "needs its edge probability"),
    ("erdos-renyi:0.001", 50, None, "P=0.001 is too small"),
    ("random-regular:3", 7, None, "n·K = 21 is odd"), ("random-regular:8", 8, None, "K=8"),
    ("random-regular:1", 6, None, "random-regular:1"),
    ("margulis", 50, None, r"perfect square.*n=50.*nearest squares: 49 or 64"),
    ("margulis", 2, None, "nearest squares: 4$"), ("margulis:3", 9, None, "'margulis:3'"),
    ("expander", 64, None, r"prime.*n=64.*nearest primes: 61 or 67"), ("expander", 2, None, "nearest primes: 3$"),
    ("one-peer-exp", 12, None, r"power of 2.*n=12.*nearest powers of 2: 8 or 16"),
])
def test_bad_input_raises_bench_error_naming_the_value(spec, n, weights, message):
    with pytest.raises(BenchError, match=message):
        make_topology(spec, n, weights=weights)


@pytest.mark.parametrize("text, n, message", [
    ("0 1\n1 2\n2 x\n", 3, r"edges\.txt:3: .*'2 x'"), ("0 1 2\n", 3, r":1: .*'0 1 2'"),
    ("0 1\n1 2\n2 3\n3 0\n", 3, r":3: node 3 is out of range"), ("0 1\n1 -2\n", 3, r":2: node -2 is out of range"),
    ("0 1\n1 1\n1 2\n", 3, r":2: self-loop"), ("0 1\n1 2\n2 0\n", 5, r"3 nodes .* but n=5"),
    ("# nothing here\n\n", 3, "no edges"), ("0 1\n2 3\n", 4, "not connected"),
])
def test_malformed_edge_list(tmp_path, text, n, message):
    path = tmp_path / "edges.txt"
    path.write_text(text)
    with pytest.raises(BenchError, match=message):
        make_topology(f"file:{path}", n)


# a missing edge list: the `file:no-such-edges.txt` row of tests/test_bad_input.py's study refusals


# ---- expanders --------------------------------------------------------------------------------------------
def authors_margulis(m: int) -> np.ndarray:
    """The authors' MargulisExpanderGraph._define_graph (dl_code/pcode/utils/topology.py of epfml/ChocoSGD)."""
    graph = nx.margulis_gabber_galil_graph(m)
    W = nx.to_numpy_array(graph, nodelist=sorted(graph.nodes))
    W[W > 1] = 1
    degrees = W.sum(axis=1)
    for node in np.argsort(degrees)[::-1]:
        W[:, node][W[:, node] == 1] = 1.0 / degrees[node]
        W[node, :][W[node, :] == 1] = 1.0 / degrees[node]
        W[node, node] = 1 - np.sum(W[node, :]) + W[node, node]
    return W


def authors_expander(p: int) -> np.ndarray:
    """The authors' ExpanderGraph._define_graph (same file): the cycle plus i -- i^-1 mod p, a loop at 0, over 3."""
    A = nx.to_numpy_array(nx.cycle_graph(p))
    A[0][0] = 1
    for i in range(1, p):
        A[i][pow(i, -1, p)] = 1
    return A / 3


@pytest.mark.parametrize("m", [2, 3, 4, 5, 8, 11])
def test_margulis_is_the_networkx_multigraph_with_the_authors_weights(m):
    topology = make_topology("margulis", m * m)
    multigraph = nx.margulis_gabber_galil_graph(m)
    index = {(x, y): x * m + y for x, y in multigraph.nodes}
    simple = {tuple(sorted((index[u], index[v]))) for u, v in multigraph.edges() if u != v}
    loops = sorted({index[u] for u, v in multigraph.edges() if u == v})
    assert topology.edges == sorted(simple) and np.flatnonzero(topology.loops).tolist() == loops
    assert set(dict(multigraph.degree).values()) == {8}  # 8-regular, a loop counting twice
    assert topology.weights == "maxdeg" and topology.max_degree <= 8
    assert np.allclose(topology.W, authors_margulis(m), rtol=0, atol=1e-15)


@pytest.mark.parametrize("p", [5, 7, 11, 13, 17, 19, 29, 31, 61, 67])
def test_expander_is_the_authors_cycle_plus_inverses(p):
    topology = make_topology("expander", p)
    theirs = authors_expander(p)
    off = ~np.eye(p, dtype=bool)
    assert np.array_equal(topology.W[off] > 0, theirs[off] > 0)  # the same links
    assert np.flatnonzero(topology.loops).tolist() == [0, 1, p - 1] and topology.max_degree == (2 if p == 5 else 3)
    good = np.isclose(theirs.sum(axis=1), 1)
    assert np.allclose(topology.W[good], theirs[good], rtol=0, atol=1e-15)  # every stochastic row of theirs
    if p % 5 in (0, 1, 4):
        # i^-1 = i ± 1 for some i (p = 5 or p ≡ ±1 mod 5): that chord is a cycle edge and the authors' row sums
        # to 2/3 (not stochastic); here the merged link gets maxdeg's 1/max(d_i, d_j), as the authors weight
        # Margulis, and the rest of the row stays on the diagonal
        assert not good.all() and topology.degree.min() == 2
        assert np.abs(theirs[~good].sum(axis=1) - 2 / 3).max() < 1e-15
    else:
        assert good.all() and set((topology.degree + topology.loops).tolist()) == {3}


def test_expanders_keep_their_gap_as_n_grows_while_the_ring_loses_it():
    ring = [make_topology("ring", n).spectral_gap for n in (64, 256)]
    assert ring[0] < 0.004 and ring[1] < ring[0] / 10
    # Margulis: 0.312 at 64, 0.249 at 256, 0.215 at 1024 (the 8-regular walk's bound 1 - 5√2/8 ≈ 0.116)
    margulis = [make_topology("margulis", n).spectral_gap for n in (64, 256, 1024)]
    assert min(margulis) > 0.2
    # the cycle-plus-inverse graph needs a prime: those next to 64 and 256; its gap levels off near 0.025
    expander = [make_topology("expander", p).spectral_gap for p in (61, 67, 251, 257)]
    assert min(expander) > 0.025 and min(expander) > 5 * ring[0]
    assert max(margulis) < 1 and max(expander) < 1
