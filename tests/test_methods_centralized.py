"""EF-SGD: EF-signSGD converges on heterogeneous workers, in float64. All-reduce SGD with exact messages, the
all-gather's bits and error feedback keeping what compression dropped for later: tests/test_laws.py."""

from bench.topology import make_topology
from test_algorithms import Quadratic, build, start

N = 8


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
