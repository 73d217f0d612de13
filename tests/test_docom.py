"""DoCoM (Yau & Wai 2023, Algorithm 1) in the suite's one-gradient variant (the momentum form of its estimator, see
bench/algorithms/docom.py): a step is Algorithm 1 with that estimator written out; it removes the bias D-PSGD keeps on
heterogeneous data; and an out-of-range option is one line naming it. Gradient tracking with exact messages, BEER at
β = 1 and MoTEF with λ = β message for message: tests/test_laws.py."""
import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.compressors import make_compressor
from bench.topology import make_topology
from test_algorithms import STEPS, Quadratic, build, start
from test_beer import LeastSquares, relative_error
from test_motef import _dpsgd_error

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


# each contraction the suite has, with a γ it converges under on a ring of 8 (d = 10) and how close 400 steps get
REACHES = [("none", 1.0, 1e-12), ("top:0.3", 0.6, 1e-5), ("sign", 0.6, 1e-5), ("qsgd:2", 0.6, 1e-5),
           ("rand:0.5", 0.5, 1e-4)]


@pytest.mark.parametrize("compressor, gamma, tol", REACHES)
def test_on_non_iid_least_squares_docom_reaches_the_optimum_dpsgd_misses(compressor, gamma, tol):
    """Exact gradients, a minimiser per worker, the same constant step: D-PSGD settles away from the optimum of the
    mean objective; DoCoM's fixed point is that optimum (v = ∇f_i there, and the tracker's mean, the mean gradient,
    vanishes only at it), with exact messages to rounding and with compressed ones to a looser bound."""
    n, steps, lr = 8, 400, 0.1
    problem = LeastSquares(n)
    algo = build("docom", make_topology("ring", n), torch.zeros(n, 10, dtype=torch.float64), compressor,
                 {"gamma": gamma, "beta": 0.5}, local_cfg=LocalStepConfig())
    for _ in range(steps):
        algo.step(problem.grad(algo.x), lr)
    assert relative_error(algo.x, problem.optimum) < tol
    assert _dpsgd_error(steps, lr) > 0.1  # D-PSGD's bias, orders of magnitude above
