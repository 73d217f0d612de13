"""Choco-SGD on a network that loses messages (its fault_rule "ack"): copies per link on any graph, a lost
message added at neither end. In float64: the average of the models is kept whatever is lost, Choco-Gossip
still reaches consensus, and a schedule that loses nothing is the method without faults. (Under torch.distributed
processes: tests/test_faults_methods.py.)"""
from __future__ import annotations


import pytest
import torch

from bench.algorithms import LocalStep, LocalStepConfig, make_algorithm
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.faults import FaultSchedule, parse_faults
from bench.topology import make_topology
from test_algorithms import Quadratic, start

D = 40


def choco(topo, faults, compressor="sign", gamma=0.4, x0=None, momentum=0.0):
    schedule = FaultSchedule(parse_faults(faults, topo.n), topo.link_union(), 1) if faults else None
    comm = SimulatedCommunicator(topo, faults=schedule)
    return make_algorithm("choco", start(topo.n, identical=False) if x0 is None else x0, comm,
                          compressor=make_compressor(compressor, contraction=True),
                          local=LocalStep(LocalStepConfig(momentum=momentum)), options={"gamma": gamma},
                          generator=torch.Generator().manual_seed(3))


# each loss pattern once, each operator at least once (γ that converge without losses): the rule is one code path
@pytest.mark.parametrize("faults, compressor, gamma", [
    ({"drop": 0.3}, "sign", 0.4), ({"drop": 0.5, "drop_model": "gilbert-elliott", "burst": 4}, "top:0.1", 0.1),
    ({"down": [{"edge": [0, 1], "rounds": [0, 400]}]}, "sign", 0.4)], ids=["bernoulli", "bursts", "link-down"])
def test_choco_gossip_keeps_the_average_whatever_is_lost_and_reaches_consensus(faults, compressor, gamma):
    topo = make_topology("ring", 8)
    algo = choco(topo, faults, compressor, gamma)
    mean = algo.x.mean(dim=0).clone()
    start_spread = float((algo.x - mean).norm())
    lost = 0
    for _ in range(2000):  # Choco-Gossip: no gradient
        lost += algo.step(None, 0.0).link_lost
    assert lost > 0
    torch.testing.assert_close(algo.x.mean(dim=0), mean, rtol=0, atol=1e-12)  # each link adds and takes the same
    # without losses these reach 1e-9 (sign: 1e-15) of the first spread by round 2000; with them at most 3e-8
    assert float((algo.x - algo.x.mean(dim=0)).norm()) < 1e-6 * start_spread


def test_a_schedule_that_loses_nothing_is_choco_without_faults():
    topo, problem = make_topology("ring", 8), Quadratic(8, D)
    x0 = start(8, identical=False)
    plain = choco(topo, None, x0=x0.clone(), momentum=0.9)
    never = choco(topo, {"down": [{"edge": [0, 1], "rounds": [10**6, 10**6 + 1]}]}, x0=x0.clone(), momentum=0.9)
    assert never.per_link and not plain.per_link
    for _ in range(20):
        a, b = plain.step(problem.grad(plain.x), 0.05), never.step(problem.grad(never.x), 0.05)
        torch.testing.assert_close(never.x, plain.x, rtol=0, atol=1e-12)
    assert a.wire_bits == b.wire_bits and b.link_lost == 0


# under torch.distributed processes: tests/test_faults_methods.py (every rule, one launch)
