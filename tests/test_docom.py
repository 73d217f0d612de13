"""DoCoM (Yau & Wai 2023, Algorithm 1) in the suite's one-gradient variant (the momentum form of its estimator, see
bench/algorithms/docom.py): a step is Algorithm 1 with that estimator written out. Gradient tracking with exact
messages, the optimum D-PSGD misses, BEER at β = 1 and MoTEF with λ = β message for message: tests/test_laws.py."""
import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.compressors import make_compressor
from bench.topology import make_topology
from test_algorithms import STEPS, Quadratic, build, start

D = 40


@pytest.mark.parametrize("compressor", ["top:0.25", "sign"])
def test_a_step_is_algorithm_1_with_the_momentum_estimator_written_out(compressor):
    """In DoCoM's letters and order: θ⁺ = θ + γ(W − I)θ̂ − ηg, θ̂⁺ = θ̂ + Q(θ⁺ − θ̂), v⁺ = (1 − β)v + β∇f(θ⁺) (the
    estimator without its STORM correction), g⁺ = g + γ(W − I)ĝ + v⁺ − v, ĝ⁺ = ĝ + Q(g⁺ − ĝ), from g⁰ = v⁰ =
    ∇f(θ⁰) and θ̂⁰ = ĝ⁰ = 0; Q deterministic, so both sides draw alike. Step t takes ∇f(θ^t) and leaves θ^{t+1}."""
    n, beta, gamma, lr = 6, 0.3, 0.4, 0.05
    topo = make_topology("ring", n)
    L = torch.tensor(topo.W, dtype=torch.float64) - torch.eye(n, dtype=torch.float64)
    problem, theta0 = Quadratic(n, D), start(n, identical=False)
    algo = build("docom", topo, theta0, compressor, {"gamma": gamma, "beta": beta}, local_cfg=LocalStepConfig())
    twin = make_compressor(compressor, contraction=True)

    def Q(value):
        return twin.compress(value).values

    theta, theta_hat, g_hat = theta0.clone(), torch.zeros_like(theta0), torch.zeros_like(theta0)
    v = problem.grad(theta)
    g = v.clone()
    for _ in range(STEPS):
        algo.step(problem.grad(algo.x), lr)
        # the module keeps DoCoM's v as m, its g as v and ĝ as g (MoTEF's names, bench/algorithms/motef.py)
        for name, value in (("m", v), ("v", g), ("g", g_hat)):
            torch.testing.assert_close(getattr(algo, name), value, rtol=0, atol=1e-10, msg=name)
        theta = theta + gamma * (L @ theta_hat) - lr * g
        theta_hat = theta_hat + Q(theta - theta_hat)
        torch.testing.assert_close(algo.x, theta, rtol=0, atol=1e-10)
        v_next = (1 - beta) * v + beta * problem.grad(theta)
        g = g + gamma * (L @ g_hat) + v_next - v
        g_hat = g_hat + Q(g - g_hat)
        v = v_next


