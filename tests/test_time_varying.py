"""Time-varying topologies: the one-peer exponential graph (Ying et al. 2021), its period product, and the
communicators' round counter that picks W_t (advanced by drain, the end of every algorithm's step)."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import TimeVaryingTopology, make_topology

from test_base_graphs import dense_product  # W_{τ−1} ⋯ W_0 by plain products, not TimeVaryingTopology.product

POWERS = [2, 4, 8, 16, 64, 256]


@pytest.mark.parametrize("n", POWERS)
def test_each_round_is_half_self_half_one_peer(n):
    topology = make_topology("one-peer-exp", n)
    tau = n.bit_length() - 1
    assert isinstance(topology, TimeVaryingTopology) and topology.period == tau and topology.weights == "uniform"
    for t in range(2 * tau + 1):
        W, k = topology.W_at(t), t % tau
        expected = 0.5 * np.eye(n)
        expected[np.arange(n), (np.arange(n) + 2**k) % n] += 0.5
        assert np.array_equal(W, expected), (n, t)
        assert np.array_equal(topology.peers_at(t), (np.arange(n) + 2**k) % n)
        # not symmetric: i hears i + 2^k, which does not hear i (except at the shift n/2)
        assert np.array_equal(W, W.T) == (2**k == n // 2 or n == 2)
    # one period averages exactly, not merely to rounding (test_topology: any period to 1e-12, not a round earlier)
    J = np.full((n, n), 1.0 / n)
    assert np.array_equal(dense_product(topology), J) and np.array_equal(topology.product(), J)
    later = functools.reduce(lambda out, t: topology.W_at(t % tau) @ out, range(3, 3 + tau), np.eye(n))
    assert np.array_equal(later, J)  # the rounds commute: a period from any round averages exactly too
    info = topology.describe()
    assert info["time_varying"] is (tau > 1) and info["period"] == tau  # n = 2: one matrix, static
    # one peer a round is what a round costs; over the period a worker meets 2τ − 1 others, the exponential graph's
    assert info["max_degree"] == info["min_degree"] == 1 and info["union_max_degree"] == 2 * tau - 1
    exponential = make_topology("exponential", n)
    assert topology.edges == exponential.edges and topology.neighbors(0) == exponential.neighbors(0)
    # rounds repeat with the period; metropolis weights are the uniform ones; a static graph's W is every round's
    assert np.array_equal(topology.W_at(1), topology.W_at(1 + 3 * tau))
    assert np.array_equal(make_topology("one-peer-exp", n, weights="metropolis").W_at(1), topology.W_at(1))
    assert exponential.period == 1 and exponential.W_at(5) is exponential.W


@pytest.mark.parametrize("build, says", [
    (lambda: make_topology("one-peer-exp", 8).W, "time-varying.*W_at"),
    (lambda: make_topology("one-peer-exp", 8).W_at(-1), "round"),
    # maxdeg puts weight 1 on the peer: each round is a permutation, a period never averages
    (lambda: make_topology("one-peer-exp", 8, weights="maxdeg"), "maxdeg.*another weight scheme: uniform, metropolis"),
    (lambda: make_topology("one-peer-exp:2", 8), "takes no argument"),
    (lambda: TimeVaryingTopology(4, [np.array([1, 1, 2, 3])], "uniform"), "not a permutation"),
])
def test_what_the_one_peer_graph_refuses(build, says):
    with pytest.raises(BenchError, match=says):
        build()


# ---- the communicators (each round's Mixer against W_t: test_comm.py's structured-gossip test) ----------------------
def test_the_round_advances_at_drain_so_two_gossips_of_a_step_share_w():
    topology = make_topology("one-peer-exp", 8)
    comm = SimulatedCommunicator(topology)
    exact = make_compressor("none")
    x = torch.randn(8, 5, dtype=torch.float64)
    for t in range(7):
        assert comm.round == t
        first, second = comm.gossip(exact.compress(x)), comm.gossip(exact.compress(x))
        expected = torch.tensor(np.asarray(topology.W_at(t))) @ x
        torch.testing.assert_close(first, expected, rtol=0, atol=1e-15)
        torch.testing.assert_close(second, expected, rtol=0, atol=1e-15)
        assert comm.drain().messages == 2


def test_static_graphs_ignore_the_round():
    topology = make_topology("ring", 6)
    comm = SimulatedCommunicator(topology)
    x = torch.randn(6, 3, dtype=torch.float64)
    exact = make_compressor("none")
    before = comm.gossip(exact.compress(x))
    comm.drain()
    comm.round = 12345
    torch.testing.assert_close(comm.gossip(exact.compress(x)), before, rtol=0, atol=0)


def test_a_fixed_graph_method_is_refused_on_a_time_varying_graph_in_one_line():
    """Choco, DCD, ECD and BEER keep their copies per link there (tests/test_time_varying_methods.py); a method
    that declares ``fixed_graph`` (CEDAS, LEAD, AD-PSGD) is refused by the one check, naming the method, the graph
    and what to use (that a static graph is fine: tests/test_laws.py's refusals)."""
    from bench.algorithms import ALGORITHMS

    fixed = [name for name in ALGORITHMS.names() if ALGORITHMS.get(name).fixed_graph]
    assert {"cedas", "lead", "adpsgd"} <= set(fixed) and "choco" not in fixed
    for name in fixed:
        with pytest.raises(BenchError) as refused:
            ALGORITHMS.get(name).check_topology("one-peer-exp", True)
        said = str(refused.value)
        assert len(said.splitlines()) == 1 and "fixed graph" in said and f"{name!r}" in said, said
        assert "'one-peer-exp'" in said and "static graph" in said and "choco" in said and "dpsgd" in said
