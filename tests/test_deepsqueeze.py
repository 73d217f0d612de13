"""DeepSqueeze (the authors' form, epfml/ChocoSGD): the special case it reduces to, its update written out by
hand, that gossip alone brings the models together, the traffic of one compressed message a round, and the distributed runtime."""

import math

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig, make_algorithm
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import make_topology
from test_algorithms import LR, TOPOLOGIES, Quadratic, build, start, trajectory

D = 40


@pytest.mark.parametrize("spec,n", TOPOLOGIES)
def test_without_compression_and_gamma_one_it_is_dpsgd_step_then_gossip(spec, n):
    """c = v = x − η d and e = 0, so x ← x + (W − I) c = W (x − η d): D-PSGD's code order, x ← W (x − η d)."""
    topo = make_topology(spec, n)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    ours = trajectory(build("deepsqueeze", topo, x0, "none", {"gamma": 1.0}), problem)
    dpsgd = trajectory(build("dpsgd", topo, x0, options={"order": "code"}), problem)
    torch.testing.assert_close(ours, dpsgd, rtol=0, atol=1e-12)


@pytest.mark.parametrize("compressor", ["sign", "top:0.2", "rand:0.2", "qsgd:4"])
def test_the_update_is_the_authors_written_out(compressor):
    """With W as a matrix: x½ = x − η d; v = x½ + e; c = Q(v); e = v − c; x = x½ + γ (W c − c)."""
    n, d, gamma = 6, 12, 0.3
    topo = make_topology("ring", n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    problem, x0 = Quadratic(n, d), start(n, d, identical=False)
    algo = build("deepsqueeze", topo, x0, compressor, {"gamma": gamma}, local_cfg=LocalStepConfig())
    twin = make_compressor(compressor, contraction=ALGORITHMS.get("deepsqueeze").contraction)
    gen = torch.Generator().manual_seed(3)  # the module's generator's seed in build
    x, e = x0.clone(), torch.zeros_like(x0)
    for _ in range(10):
        half = x - LR * problem.grad(x)
        v = half + e
        c = twin.compress(v, gen).values
        e = v - c
        x = half + gamma * (W @ c - c)
        algo.step(problem.grad(algo.x), LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-12)
        torch.testing.assert_close(algo.error, e, rtol=0, atol=1e-12)
    assert algo.error.abs().sum() > 0 or compressor == "none"


# the average moves as SGD's whatever the compression: tests/test_keeping_the_average.py
def test_gossip_alone_brings_the_models_together():
    """With no gradient the models contract to their (unchanged) average despite a 1-bit sign compressor."""
    n = 8
    topo = make_topology("ring", n)
    algo = build("deepsqueeze", topo, start(n, identical=False), "sign", {"gamma": 0.2}, local_cfg=LocalStepConfig())
    mean = algo.x.mean(0)
    spread = float((algo.x - mean).norm())
    for _ in range(300):
        algo.step(None, LR)
    assert float((algo.x - mean).norm()) < 0.1 * spread


@pytest.mark.parametrize("compressor", ["none", "sign", "top:0.1", "qsgd:4"])
def test_one_compressed_message_a_round_in_wire_and_paper_bits(compressor):
    n, segments = 8, [10, 30]
    topo = make_topology("ring", n)
    comp = make_compressor(compressor, contraction=ALGORITHMS.get("deepsqueeze").contraction)
    algo = make_algorithm("deepsqueeze", start(n), SimulatedCommunicator(topo), compressor=comp,
                          options={"gamma": 0.5}, generator=torch.Generator().manual_seed(0), segments=segments)
    problem = Quadratic(n, D)
    for _ in range(3):
        traffic = algo.step(problem.grad(algo.x), LR)
        assert traffic.messages == 1
        # one message to both ring neighbours: a copy per link, framed in whole bytes
        assert traffic.wire_bits == 2 * 8 * math.ceil(comp.wire_bits(segments) / 8)
        assert traffic.paper_bits == comp.paper_bits(segments)
        assert traffic.comm_time_s > 0
