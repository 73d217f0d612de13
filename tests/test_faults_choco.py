"""The acknowledgement rule on a network that loses messages (fault_rule "ack": Choco-SGD, and BEER for its h and
g): copies per link on any graph, a lost message added at neither end. In float64: the average of the models is
kept whatever is lost, the gossip still reaches consensus, and a schedule that loses nothing is the method without
faults. (Under torch.distributed processes: tests/test_faults_methods.py.)"""
from __future__ import annotations

import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.topology import make_topology
from test_algorithms import Quadratic, start
from test_faults_methods import BERNOULLI, BURSTS, D, build

DOWN = {"down": [{"edge": [0, 1], "rounds": [0, 400]}]}


# each loss pattern once, each operator at least once (γ that converge without losses): the rule is one code path.
# BEER's step with grad=None: x ← x + γ u_h, then h's update (Choco-Gossip in the code order), on per-link copies.
@pytest.mark.parametrize("method, faults, compressor, gamma", [
    ("choco", BERNOULLI, "sign", 0.4), ("choco", {"drop": 0.5, "drop_model": "gilbert-elliott", "burst": 4}, "top:0.1", 0.1),
    ("choco", DOWN, "sign", 0.4), ("beer", BERNOULLI, "sign", 0.4), ("beer", BURSTS, "top:0.1", 0.1),
    ("beer", DOWN, "sign", 0.4)],
    ids=["choco-bernoulli", "choco-bursts", "choco-link-down", "beer-bernoulli", "beer-bursts", "beer-link-down"])
def test_acknowledged_gossip_keeps_the_average_whatever_is_lost_and_reaches_consensus(method, faults, compressor,
                                                                                     gamma):
    algo = build(method, make_topology("ring", 8), faults, compressor, gamma)
    mean = algo.x.mean(dim=0).clone()
    start_spread = float((algo.x - mean).norm())
    lost = 0
    for _ in range(2000):  # gossip alone: no gradient
        lost += algo.step(None, 0.0).link_lost
    assert lost > 0
    torch.testing.assert_close(algo.x.mean(dim=0), mean, rtol=0, atol=1e-12)  # each link adds and takes the same
    # without losses these reach 1e-9 (sign: 1e-15) of the first spread by round 2000; with them at most 3e-8
    assert float((algo.x - algo.x.mean(dim=0)).norm()) < 1e-6 * start_spread


@pytest.mark.parametrize("method, compressor", [("choco", "sign"), ("beer", "sign"), ("beer", "top:0.1")])
def test_a_schedule_that_loses_nothing_is_the_method_without_faults(method, compressor):
    """Every link used every round and nothing lost: a worker's out-link copies agree (an operator without
    randomness), so the per-link sums are (W − I)·copy and the iterates (BEER's tracker too) and the bits are the
    static method's."""
    topo, problem = make_topology("ring", 8), Quadratic(8, D)
    x0, local = start(8, identical=False), LocalStepConfig(momentum=0.9)
    plain = build(method, topo, None, compressor, x0=x0.clone(), local=local)
    never = build(method, topo, {"down": [{"edge": [0, 1], "rounds": [10**6, 10**6 + 1]}]}, compressor,
                  x0=x0.clone(), local=local)
    assert never.per_link and not plain.per_link
    for _ in range(30):
        a, b = plain.step(problem.grad(plain.x), 0.05), never.step(problem.grad(never.x), 0.05)
        torch.testing.assert_close(never.x, plain.x, rtol=0, atol=1e-12)
        if method == "beer":
            torch.testing.assert_close(never.v, plain.v, rtol=0, atol=1e-12)
    assert a.wire_bits == b.wire_bits and b.link_lost == 0
