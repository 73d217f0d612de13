"""DoCoM (Yau & Wai 2023, Algorithm 1) in the suite's one-gradient variant (the momentum form of its estimator, see
bench/algorithms/docom.py): with the identity, γ = 1 and β = 1 it is plain gradient tracking; a step is Algorithm 1
with that estimator written out; β = 1 is BEER and any β is MoTEF with λ = β, message for message (on a static
graph, a time-varying one and a lossy network); it removes the bias D-PSGD keeps on heterogeneous data; and an
out-of-range option is one line naming it."""
import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.cli import main
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import make_topology
from test_algorithms import LR, STEPS, TOPOLOGIES, Quadratic, build, start
from test_beer import LeastSquares, relative_error
from test_keeping_the_average import build_method
from test_motef import _dpsgd_error

D = 40


@pytest.mark.parametrize("spec,n", TOPOLOGIES)
def test_identity_compression_gamma_one_and_beta_one_is_plain_gradient_tracking(spec, n):
    """β = 1: v is the gradient (plus weight decay, the local step's); θ̂ = θ and ĝ = g after every update, so
    θ ← W θ − η g and g ← W g + v_new − v_old; the copies start at 0, so the first step is a local one."""
    topo = make_topology(spec, n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    wd = 1e-2
    algo = build("docom", topo, x0, "none", {"gamma": 1.0, "beta": 1.0}, local_cfg=LocalStepConfig(weight_decay=wd))
    x, g, previous = x0.clone(), None, None
    for k in range(STEPS):
        v = problem.grad(x) + wd * x
        if k == 0:
            x = x - LR * v
        else:
            g = v if k == 1 else W @ g + v - previous
            x = W @ x - LR * g
        previous = v
        algo.step(problem.grad(algo.x), LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-10)
        if g is not None:
            torch.testing.assert_close(algo.v, g, rtol=0, atol=1e-10)  # the module's tracker is DoCoM's g


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


def _twins(a, b, problem, steps=STEPS) -> list[str]:
    """Steps both side by side; the buffers of the two that differ at some step (empty: the same run)."""
    differ = set()
    for _ in range(steps):
        ours, theirs = a.step(problem.grad(a.x), LR), b.step(problem.grad(b.x), LR)
        assert (ours.wire_bits, ours.paper_bits, ours.messages, ours.link_lost) == (
            theirs.wire_bits, theirs.paper_bits, theirs.messages, theirs.link_lost)
        differ |= {name for name in ("x", "h", "v", "g", "m") if hasattr(b, name)
                   and not torch.equal(getattr(a, name), getattr(b, name))}
    return sorted(differ)


@pytest.mark.parametrize("compressor", ["rand:0.3", "qsgd:4"])
def test_beta_one_is_beer_message_for_message(compressor):
    """β = 1 is Algorithm 1 exactly (both estimators are the plain gradient), which is BEER's recursion: the same
    iterates, copies and traffic bit for bit, random draws included, with the run's Nesterov momentum and weight decay."""
    n = 8
    topo, problem, x0 = make_topology("ring", n), Quadratic(n, D), start(n, identical=False)
    assert _twins(build("docom", topo, x0, compressor, {"gamma": 0.4, "beta": 1.0}),
                  build("beer", topo, x0, compressor, {"gamma": 0.4}), problem) == []


@pytest.mark.parametrize("spec, n, faults", [("ring", 8, None), ("one-peer-exp", 8, None),
                                             ("ring", 8, {"drop": 0.3}), ("ring", 8, {"late": 0.3, "staleness": 2})])
def test_any_beta_is_motef_with_lambda_beta(spec, n, faults):
    """Without the STORM correction DoCoM's recursion is MoTEF's in other letters: the same run for β = λ, on a
    static graph, a time-varying one and a network that loses or delays messages."""
    topo, problem, x0 = make_topology(spec, n), Quadratic(n, D), start(n, identical=False)
    assert _twins(build_method("docom", topo, x0, "rand:0.3", {"gamma": 0.4, "beta": 0.3}, faults),
                  build_method("motef", topo, x0, "rand:0.3", {"gamma": 0.4, "lam": 0.3}, faults), problem) == []


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
