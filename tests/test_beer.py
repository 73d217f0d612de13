"""BEER (Zhao et al. 2022, Algorithm 1): gradient tracking with compressed communication. It reduces to plain
gradient tracking, its average follows SGD on the average direction, it removes the bias D-PSGD keeps on
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

D = 40
COMPRESSORS = ["none", "sign", "top:0.1", "rand:0.1", "rand:0.1,unbiased=true", "qsgd:4", "qsgd:4,biased=false"]


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


@pytest.mark.parametrize("compressor", COMPRESSORS)
def test_the_tracker_keeps_the_average_direction_and_the_average_moves_as_sgd(compressor):
    """W doubly stochastic: mean((W − I) g) = 0, so mean(v_t) = mean(d_t) (v⁰ = d⁰ and v gains d_t − d_{t−1}),
    and mean(x_{t+1}) = mean(x_t) − η mean(v_t) = mean(x_t) − η mean(d_t), whatever the compression."""
    n = 9
    topo = make_topology("torus", n)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    algo = build("beer", topo, x0, compressor, {"gamma": 0.4},
                 local_cfg=LocalStepConfig(momentum=0.5, weight_decay=1e-3))
    directions = []
    original = algo.local.direction

    def recording(x, g):
        out = original(x, g)
        directions.append(out.clone())
        return out

    algo.local.direction = recording
    for _ in range(STEPS):
        before = algo.x.mean(0)
        algo.step(problem.grad(algo.x), LR)
        scale = max(float(v.abs().max()) for v in algo.state_dict().values() if torch.is_tensor(v))
        tol = 1e-13 * max(1.0, scale) * len(directions)  # v sums a difference of directions every step
        torch.testing.assert_close(algo.v.mean(0), directions[-1].mean(0), rtol=0, atol=tol)
        torch.testing.assert_close(algo.x.mean(0), before - LR * directions[-1].mean(0), rtol=0, atol=tol)


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


@pytest.mark.parametrize("bad", [{"gamma": 0.0}, {"gamma": 1.5}, {"gama": 0.1}])
def test_bad_options_are_one_line_errors(bad):
    with pytest.raises(BenchError, match="gamma|gama"):
        build("beer", make_topology("ring", 4), start(4), "sign", bad)
