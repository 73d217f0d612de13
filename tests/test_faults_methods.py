"""Methods on a network that loses messages, in float64 (DeepSqueeze's update with the round's reweighted W, D-PSGD's
rule: tests/test_deepsqueeze.py). The acknowledgement rule (fault_rule "ack": Choco-SGD,
and BEER for its h and g): copies per link on any graph, a lost message added at neither end, so the average of the
models is kept whatever is lost, the gossip still reaches consensus, and a schedule that loses nothing is the method
without faults. (Under torch.distributed processes: tests/test_dist.py; where the average goes under losses and with
workers away, for every method with a rule: tests/test_keeping_the_average.py; what a method without a rule is
told: tests/test_faults_run.py.)"""
from __future__ import annotations

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStep, LocalStepConfig, make_algorithm
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.faults import FaultSchedule, parse_faults
from bench.topology import make_topology
from test_algorithms import start

BERNOULLI = {"drop": 0.3}
BURSTS = {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 4}


def build(name, topo, faults, compressor="sign", gamma=0.4, x0=None, local=None):
    """``name`` on a simulated ``topo`` that loses messages as ``faults`` says (None: a perfect network); ``gamma``
    None for a method without it."""
    schedule = FaultSchedule(parse_faults(faults, topo.n), topo.link_union(), 1) if faults is not None else None
    comm = SimulatedCommunicator(topo, faults=schedule)
    return make_algorithm(name, start(topo.n, identical=False) if x0 is None else x0, comm,
                          compressor=make_compressor(compressor, contraction=ALGORITHMS.get(name).contraction),
                          local=LocalStep(local or LocalStepConfig()), options={"gamma": gamma} if gamma else {},
                          generator=torch.Generator().manual_seed(3))


# -- the acknowledgement rule (Choco, BEER) --------------------------------------------------------------------
DOWN = {"down": [{"edge": [0, 1], "rounds": [0, 400]}]}


# each loss pattern once, each operator at least once (γ that converge without losses): the rule is one code path.
# BEER's step with grad=None: x ← x + γ u_h, then h's update (Choco-Gossip in the code order), on per-link copies.
@pytest.mark.parametrize("method, faults, compressor, gamma", [
    ("choco", BERNOULLI, "sign", 0.4),
    ("choco", {"drop": 0.5, "drop_model": "gilbert-elliott", "burst": 4}, "top:0.1", 0.1),
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


# a schedule that loses nothing (every link used every round, nothing lost) is the static method, BEER's tracker
# too: tests/test_time_varying_methods.py (test_where_every_link_is_used_every_round_the_per_link_form_is_...)
