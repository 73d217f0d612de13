"""BEER (Zhao et al. 2022, Algorithm 1): gradient tracking with compressed communication. It reduces to plain
gradient tracking, its tracker keeps the average direction (on any graph, whatever is lost or late), it removes the bias D-PSGD keeps on
heterogeneous data, it sends two compressed messages a round, and the distributed runtime agrees with the
simulation."""

import math

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig, make_algorithm
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import make_topology
from test_algorithms import LR, STEPS, TOPOLOGIES, Quadratic, build, start
from test_keeping_the_average import COMPRESSORS as AVERAGE_COMPRESSORS
from test_keeping_the_average import LATE, ONE_WAY, SYMMETRIC, build_method, recording, takes

D = 40


class LeastSquares:
    """Worker i holds f_i(x) = ½‖A_i x − b_i‖² with its own data and its own offset in b_i, so the workers'
    minimisers differ (non-i.i.d.); gradients are exact (deterministic)."""

    def __init__(self, n, d=10, m=20, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.A = torch.randn(n, m, d, generator=g, dtype=torch.float64) / m ** 0.5
        self.b = (torch.randn(n, m, generator=g, dtype=torch.float64)
                  + 3 * torch.randn(n, 1, generator=g, dtype=torch.float64))
        hessian = torch.einsum("nmi,nmj->ij", self.A, self.A)
        self.optimum = torch.linalg.solve(hessian, torch.einsum("nmi,nm->i", self.A, self.b))  # of mean_i f_i

    def grad(self, x):
        residual = torch.einsum("nmd,nd->nm", self.A, x) - self.b
        return torch.einsum("nmd,nm->nd", self.A, residual)


def relative_error(x, optimum):
    return float((x - optimum).norm(dim=1).max() / optimum.norm())


@pytest.mark.parametrize("spec,n", TOPOLOGIES)
def test_identity_compression_and_gamma_one_is_plain_gradient_tracking(spec, n):
    """h = x and g = v after every update, so x ← W x − η v and v ← W v + d_new − d_old; the public copies start at
    0, so the first step is a local one (x¹ = x⁰ − η d⁰) and tracking starts from v¹ = d¹."""
    topo = make_topology(spec, n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    wd = 1e-2
    algo = build("beer", topo, x0, "none", {"gamma": 1.0}, local_cfg=LocalStepConfig(weight_decay=wd))

    def direction(x):
        return problem.grad(x) + wd * x

    x, v, previous = x0.clone(), None, None
    for k in range(STEPS):
        d = direction(x)
        if k == 0:
            x = x - LR * d
        else:
            v = d if k == 1 else W @ v + d - previous
            x = W @ x - LR * v
        previous = d
        algo.step(problem.grad(algo.x), LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-10)
        if v is not None:
            torch.testing.assert_close(algo.v, v, rtol=0, atol=1e-10)


TRACKER_CASES = [pytest.param("torus", 9, None, id="torus"), pytest.param("one-peer-exp", 16, None, id="one-peer-exp")] + [
    pytest.param("ring", 8, faults, id=label) for label, faults in
    {**ONE_WAY, "both ways": SYMMETRIC["both ways"], **LATE}.items()]


@pytest.mark.parametrize("spec, n, faults", TRACKER_CASES)
def test_the_tracker_keeps_the_average_direction(spec, n, faults):
    """mean((W − I) g) = 0 for a doubly stochastic W, the round's W_t, or copies per link that add a message at both
    ends or at neither (lost) or when it lands (late): v⁰ = d⁰ and v gains d_t − d_{t−1}, so mean(v_t) = mean(d_t),
    for every compressor BEER takes. (Its average then moves as SGD's: tests/test_keeping_the_average.py.)"""
    topo, problem = make_topology(spec, n), Quadratic(n, D)
    for compressor in (c for c in AVERAGE_COMPRESSORS if takes(ALGORITHMS.get("beer"), c)):
        algo = build_method("beer", topo, start(n, identical=False), compressor, {"gamma": 0.4}, faults)
        directions, lost = recording(algo), 0
        for _ in range(STEPS):
            lost += algo.step(problem.grad(algo.x), LR).link_lost
            # v sums a difference of directions every step: rounding grows with the steps
            tol = 1e-13 * max(1.0, float(algo.v.abs().max())) * len(directions)
            torch.testing.assert_close(algo.v.mean(0), directions[-1].mean(0), rtol=0, atol=tol)
        assert lost > 0 or faults is None


def test_on_non_iid_least_squares_dpsgd_keeps_a_bias_that_beer_removes():
    """Constant step, exact gradients, a minimiser per worker: D-PSGD settles at a fixed point away from the
    optimum of the mean objective; BEER's fixed point is that optimum (the tracker carries the mean gradient,
    which vanishes only there), with exact or compressed messages."""
    n, steps, lr = 8, 1000, 0.1
    topo = make_topology("ring", n)
    problem = LeastSquares(n)
    x0 = torch.zeros(n, 10, dtype=torch.float64)
    dpsgd = build("dpsgd", topo, x0, local_cfg=LocalStepConfig())
    errors = []
    for t in range(steps):
        dpsgd.step(problem.grad(dpsgd.x), lr)
        if t + 1 in (steps // 2, steps):
            errors.append(relative_error(dpsgd.x, problem.optimum))
    assert errors[0] > 0.1 and abs(errors[1] - errors[0]) < 1e-9  # a fixed point, and not the optimum
    assert float((dpsgd.x.mean(0) - problem.optimum).norm() / problem.optimum.norm()) > 1e-2  # nor is its average
    for compressor, gamma in [("none", 1.0), ("none", 0.5), ("top:0.5", 0.5), ("qsgd:4", 0.5), ("sign", 0.5),
                              ("rand:0.5", 0.5)]:
        beer = build("beer", topo, x0, compressor, {"gamma": gamma}, local_cfg=LocalStepConfig())
        for _ in range(steps):
            beer.step(problem.grad(beer.x), lr)
        assert relative_error(beer.x, problem.optimum) < 1e-6, compressor


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


@pytest.mark.parametrize("compressor", ["none", "sign", "top:0.1", "qsgd:4"])
def test_two_compressed_messages_a_round_one_in_the_first(compressor):
    """The tracker's copy g starts at 0 and first moves in step 2; from then on q_g and q_h travel every round."""
    n, segments = 8, [10, 30]
    topo = make_topology("ring", n)
    comp = make_compressor(compressor, contraction=ALGORITHMS.get("beer").contraction)
    algo = make_algorithm("beer", start(n), SimulatedCommunicator(topo), compressor=comp, options={"gamma": 0.5},
                          generator=torch.Generator().manual_seed(0), segments=segments)
    problem = Quadratic(n, D)
    # each message goes to both ring neighbours, a copy per link framed in whole bytes
    wire, paper = 2 * 8 * math.ceil(comp.wire_bits(segments) / 8), comp.paper_bits(segments)
    for k in range(4):
        traffic = algo.step(problem.grad(algo.x), LR)
        messages = 1 if k == 0 else 2
        assert traffic.messages == messages
        assert traffic.wire_bits == messages * wire and traffic.paper_bits == messages * paper
        assert traffic.comm_time_s > 0
