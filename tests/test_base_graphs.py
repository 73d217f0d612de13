"""Base-(k+1) graphs (Takezawa et al. 2023; bench/topology/base_graph.py, scheduled.py): at most k peers a round and
exact consensus after one period, for any n."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench.cli import main
from bench.errors import BenchError
from bench.topology import TimeVaryingTopology, make_topology
from bench.topology.base_graph import base_digits, base_graph, factors, hyper_hypercube, simple_base_graph, smooth_part
from bench.topology.scheduled import ScheduledTopology

SIZES = [*range(2, 21), 25, 64]


def dense_product(topology) -> np.ndarray:
    out = np.eye(topology.n)
    for t in range(topology.period):
        out = topology.W_at(t) @ out
    return out


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("n", SIZES)
def test_one_period_averages_exactly_with_at_most_k_peers_a_round(n, k):
    topology = make_topology(f"base:{k}", n)
    # each round symmetric doubly stochastic: test_topology's generic test on the examples, and ScheduledTopology's
    # own check (a round that is not is refused, below)
    assert isinstance(topology, TimeVaryingTopology) and topology.kind == "base"
    assert np.abs(dense_product(topology) - 1.0 / n).max() <= 1e-12
    for t in range(topology.period):
        W = topology.W_at(t)
        assert ((W > 0) & ~np.eye(n, dtype=bool)).sum(axis=1).max() <= k
    assert topology.max_degree <= k and topology.spectral_gap == pytest.approx(1.0, abs=1e-12)
    # the paper's bound on the period (and the authors' test of it)
    assert topology.period <= 2 * math.log(n, k + 1) + 2


@pytest.mark.parametrize("m", range(1, 7))
def test_base_2_on_a_power_of_two_is_as_fast_as_the_one_peer_exponential_graph(m):
    """k = 1 on n = 2^m: one peer a round and the exact average after log2 n rounds, as one-peer-exp."""
    n = 2 ** m
    base, one_peer = make_topology("base:1", n), make_topology("one-peer-exp", n)
    assert base.period == one_peer.period == m and base.max_degree == one_peer.max_degree == 1
    J = np.full((n, n), 1.0 / n)
    assert np.array_equal(dense_product(one_peer), J)
    assert np.abs(dense_product(base) - J).max() <= 1e-15
    assert base.spectral_gap == one_peer.spectral_gap == 1.0
    # neither reaches it a round earlier
    early = np.eye(n)
    for t in range(m - 1):
        early = base.W_at(t) @ early
    assert np.abs(early - J).max() > 0.5 / n


def test_the_pieces_by_hand():
    assert base_digits(25, 2) == [(2, 2), (2, 1), (1, 0)]  # 25 = 2·9 + 2·3 + 1
    assert all(sum(a * (k + 1) ** p for a, p in base_digits(n, k)) == n for n in range(1, 200) for k in (1, 2, 3))
    assert factors(12, 3) == [3, 4] and factors(7, 4) is None and factors(1, 2) == []
    assert smooth_part(10, 1) == 2 and smooth_part(45, 2) == 9 and smooth_part(7, 1) == 1
    # 12 nodes, k = 3: 12 = 3·4, cliques of 3 consecutive nodes, then of 4 nodes 3 apart
    rounds = hyper_hypercube(range(12), 3)
    assert [sorted(m) for m, _ in rounds[0]] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    assert [sorted(m) for m, _ in rounds[1]] == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    assert all(np.all(w == 1 / len(m)) for r in rounds for m, w in r)
    # 5 nodes, k = 1: 5 = 4 + 1; pairs twice on {0..3}, then node 4 takes the share 4/5 of the group {0..3}
    # from its last node, 3 (and node 3 the same of node 4's) while 0 and 1 of the unlinked average (the authors'
    # inner edge), then {0..3} re-averages by two rounds of pairs: 5 rounds
    simple = simple_base_graph(range(5), 1)
    assert len(simple) == 5
    (members, weights), (inner, _) = simple[2]
    assert members == [4, 3] and inner == [0, 1] and np.allclose(weights, [[0.2, 0.8], [0.8, 0.2]])
    x = np.array([1.0, 1.0, 1.0, 1.0, 6.0])  # {0..3} averaged to 1; node 4 alone: the average is 2
    x[[4, 3]] = weights @ x[[4, 3]]
    assert x[4] == pytest.approx(2.0) and x[:4].mean() == pytest.approx(2.0)
    # 10 = 2·5, k = 1: the simple graph on each half (5 rounds) then one round of pairs i, i + 5 (6 rounds),
    # where the simple graph on all 10 (10 = 8 + 2) takes 3 + 1 + 3 = 7
    assert len(simple_base_graph(range(10), 1)) == 7 and len(base_graph(10, 1)) == 6
    assert make_topology("base:1", 10).period == 6


@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_split_is_kept_only_where_it_is_shorter(k):
    for n in range(2, 60):
        assert len(base_graph(n, k)) <= len(simple_base_graph(range(n), k))


def test_k_at_least_n_is_one_round_of_exact_averaging():
    topology = make_topology("base:9", 6)
    assert topology.period == 1 and not topology.time_varying
    assert np.allclose(topology.W_at(0), 1 / 6, atol=1e-15, rtol=0)


def test_a_round_that_is_not_symmetric_doubly_stochastic_is_refused():
    J = np.full((3, 3), 1 / 3)
    ScheduledTopology(3, [J], "given")  # fine
    cyclic = np.roll(np.eye(3), 1, axis=1)  # doubly stochastic, not symmetric
    for bad, words in [(cyclic, "not symmetric"), (J * 0.9, "do not sum to 1"), (np.eye(4), "3×3"),
                       (np.array([[1.5, -0.5, 0], [-0.5, 1.5, 0], [0, 0, 1.0]]), "negative"),
                       (np.eye(3), "never links")]:
        with pytest.raises(BenchError, match=words):
            ScheduledTopology(3, [bad], "given")
    with pytest.raises(BenchError, match="does not contract"):  # links, but never across {0, 1} | {2}
        ScheduledTopology(3, [np.array([[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1.0]])], "given")


def test_describe_and_what_a_several_peer_round_answers():
    topology = make_topology("base:2", 7)
    info = topology.describe()
    assert info["time_varying"] is True and info["period"] == topology.period and info["max_degree"] <= 2
    assert info["weights"] == "base-graph" and info["gap_of"] == "product over one period"
    with pytest.raises(BenchError, match="several peers"):
        topology.peers_at(0)
    links = topology.links_at(0)
    assert np.bincount(links.dst, minlength=7).max() <= 2


def test_bench_run_records_the_spectrum_and_n_eff(tmp_path):
    out = tmp_path / "run"
    argv = ["run", "--task", "lsq", "--nodes", "6", "--epochs", "1", "--seed", "1", "--topology", "base:1",
            "--algorithm", "dpsgd", "--set", "batch_size=8", "--set", "compute_time=0.01", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    topology = json.loads((out / "run.json").read_text())["topology"]
    assert topology["name"] == "base:1" and topology["time_varying"] is True and topology["period"] == 4
    assert topology["max_degree"] == 1  # a round costs a message to one peer
    assert topology["gap_of"] == "product over one period" and topology["spectral_gap"] == pytest.approx(1.0)
    assert len(topology["spectrum"]) == 6 and "product over one period" in topology["spectrum_of"]
    assert set(topology["n_eff"]) == {"gamma=0.5", "gamma=0.9", "gamma=0.99"} and "rounds" in topology["n_eff_of"]
    assert all(1 < v < 6 for v in topology["n_eff"].values())


AUTHORS = json.loads((Path(__file__).with_name("base_graph_authors.json")).read_text())["cases"]


@pytest.mark.parametrize("case", AUTHORS, ids=lambda c: f"n{c['n']}-k{c['k']}-inner{c['inner_edges']}")
def test_the_round_matrices_are_the_authors(case):
    """Every round as the authors' code builds it (tests/base_graph_authors.json, from their BaseGraph): a group
    that is done keeps averaging within itself instead of idling, and with inner_edges the unlinked nodes of a
    group average in its round of phase 2. (All 252 cases n = 2..64, k = 1..4 and both variants matched when the
    rule was written; these are the ones where the idle-node form differed.)"""
    n, k = case["n"], case["k"]
    topology = make_topology(f"base:{k}" + ("" if case["inner_edges"] else ",inner_edges=false"), n)
    assert topology.period == len(case["rounds"])
    for t, entries in enumerate(case["rounds"]):
        theirs = np.zeros((n, n))
        for i, j, w in entries:
            theirs[i, j] = w
        np.testing.assert_allclose(topology.W_at(t), theirs, rtol=0, atol=1e-6)
