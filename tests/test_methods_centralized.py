"""EF-SGD: error feedback keeps what compression dropped for later, and EF-signSGD converges on heterogeneous workers,
in float64. All-reduce SGD with exact messages and the all-gather's bits: tests/test_laws.py."""
import pytest
import torch

from bench.topology import make_topology
from test_algorithms import LR, Quadratic, build, start

N = 8


@pytest.mark.parametrize("compressor", ["sign", "top:0.1", "rand:0.2", "qsgd:2"])
def test_error_feedback_keeps_every_dropped_step_for_later(compressor):
    """All models stay equal, and x_T = x_0 − Σ_t η·mean(d_t) + mean(e_T): nothing compression dropped is
    lost, it is only late (Karimireddy et al. 2019, the error-feedback identity)."""
    topo = make_topology("ring", N)
    problem = Quadratic(N, 40)
    algo = build("ef", topo, start(N), compressor)
    x0 = algo.x.clone()
    applied = torch.zeros_like(x0[0])
    for _ in range(30):
        grad = problem.grad(algo.x)
        momentum = None if algo.local.momentum_buffer is None else algo.local.momentum_buffer.clone()
        direction = algo.local.direction(algo.x, grad)  # advances the buffer as the step would ...
        algo.local.momentum_buffer = momentum  # ... so put it back before the real step
        applied += LR * direction.mean(dim=0)
        algo.step(grad, LR)
    assert torch.equal(algo.x, algo.x[:1].expand_as(algo.x))  # one model
    torch.testing.assert_close(algo.x[0], x0[0] - applied + algo.error.mean(dim=0), rtol=0, atol=1e-10)
    assert algo.error.abs().sum() > 0  # the compressor did drop something


def test_ef_sign_reaches_the_optimum_of_the_mean_objective():
    """EF-signSGD converges on a strongly convex problem with heterogeneous workers under a decaying step
    (each worker's sign drops most of its gradient; error feedback returns it later)."""
    from bench.algorithms import LocalStepConfig

    problem = Quadratic(N, 40, seed=4)
    optimum = (problem.a * problem.c).sum(0) / problem.a.sum()
    algo = build("ef", make_topology("ring", N), start(N), "sign", local_cfg=LocalStepConfig())
    errors = {}
    for t in range(4000):
        algo.step(problem.grad(algo.x), 0.2 / (1 + t / 50))
        errors[t + 1] = float((algo.x[0] - optimum).norm() / optimum.norm())
    assert errors[4000] < 5e-3 and errors[4000] < errors[1000] / 2

