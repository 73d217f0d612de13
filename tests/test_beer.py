"""BEER (Zhao et al. 2022, Algorithm 1): gradient tracking with compressed communication; gossip alone
brings the models together. What it declares (plain gradient tracking with exact messages, the optimum D-PSGD misses,
two messages a round, its tracker, its average): tests/test_laws.py and tests/test_keeping_the_average.py."""
import torch

from bench.algorithms import LocalStepConfig
from bench.topology import make_topology
from test_algorithms import LR, build, start


def test_gossip_alone_brings_the_models_together():
    """With no gradient a round is Choco-Gossip on x (one message): the models reach their unchanged average."""
    n = 8
    topo = make_topology("ring", n)
    algo = build("beer", topo, start(n, identical=False), "top:0.25", {"gamma": 0.3}, local_cfg=LocalStepConfig())
    mean = algo.x.mean(0)
    spread = float((algo.x - mean).norm())
    for _ in range(400):
        traffic = algo.step(None, LR)
        assert traffic.messages == 1
    torch.testing.assert_close(algo.x.mean(0), mean, rtol=0, atol=1e-12)
    assert float((algo.x - mean).norm()) < 1e-3 * spread


