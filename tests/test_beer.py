"""BEER (Zhao et al. 2022, Algorithm 1): gradient tracking with compressed communication. It removes the bias
D-PSGD keeps on heterogeneous data, and gossip alone brings the models together. What it declares (plain gradient
tracking with exact messages, two messages a round, its tracker, its average): tests/test_laws.py and
tests/test_keeping_the_average.py."""
import torch

from bench.algorithms import LocalStepConfig
from bench.topology import make_topology
from test_algorithms import LR, build, start


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


