"""MoTEF (Islamov, Gao, Stich 2024, Algorithm 1): a step is Algorithm 1 written out, with a compressor; with the
identity and γ = 1 it is gradient tracking of the momentum; λ = 1 is BEER message for message; its tracker keeps the
average direction and its momentum is the average of the gradients (on any graph, whatever is lost or late); it
removes the bias D-PSGD keeps on heterogeneous data; and an out-of-range option is one line naming it."""
import functools

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig
from bench.cli import main
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import make_topology
from test_algorithms import LR, STEPS, TOPOLOGIES, Quadratic, build, start
from test_beer import TRACKER_CASES, LeastSquares, relative_error
from test_keeping_the_average import COMPRESSORS as AVERAGE_COMPRESSORS
from test_keeping_the_average import build_method, recording, takes

D = 40


@pytest.mark.parametrize("lam", [1.0, 0.3])
@pytest.mark.parametrize("spec,n", TOPOLOGIES)
def test_identity_compression_and_gamma_one_is_gradient_tracking_of_the_momentum(spec, n, lam):
    """h = x and g = v after every update, so x ← W x − η v and v ← W v + d_new − d_old, d the local step of the
    momentum m ← (1 − λ) m + λ ∇f (m⁰ = ∇f(x⁰)); the copies start at 0, so the first step is a local one."""
    topo = make_topology(spec, n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    wd = 1e-2
    algo = build("motef", topo, x0, "none", {"gamma": 1.0, "lam": lam}, local_cfg=LocalStepConfig(weight_decay=wd))
    x, v, m, previous = x0.clone(), None, None, None
    for k in range(STEPS):
        g = problem.grad(x)
        m = g if k == 0 else (1 - lam) * m + lam * g
        d = m + wd * x
        if k == 0:
            x = x - LR * d
        else:
            v = d if k == 1 else W @ v + d - previous
            x = W @ x - LR * v
        previous = d
        algo.step(problem.grad(algo.x), LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-10)
        torch.testing.assert_close(algo.m, m, rtol=0, atol=1e-10)
        if v is not None:
            torch.testing.assert_close(algo.v, v, rtol=0, atol=1e-10)


@pytest.mark.parametrize("compressor", ["top:0.25", "sign"])
def test_a_step_is_algorithm_1_written_out(compressor):
    """Algorithm 1 in its own order and indices, with a compressor Q (deterministic, so both sides draw alike):
    x⁺ = x + γ(W − I)h − ηv, h⁺ = h + Q(x⁺ − h), m⁺ = (1 − λ)m + λ∇f(x⁺), v⁺ = v + γ(W − I)g + d⁺ − d,
    g⁺ = g + Q(v⁺ − g), with d = m + wd·x and v⁰ = d⁰. The module's step t takes ∇f(x^t) and leaves x^{t+1} and
    h^{t+1} beside v^t, m^t and g^t (BEER's reordering)."""
    n, lam, gamma, lr, wd = 6, 0.3, 0.4, 0.05, 1e-2
    topo = make_topology("ring", n)
    L = torch.tensor(topo.W, dtype=torch.float64) - torch.eye(n, dtype=torch.float64)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    algo = build("motef", topo, x0, compressor, {"gamma": gamma, "lam": lam},
                 local_cfg=LocalStepConfig(weight_decay=wd))
    twin = make_compressor(compressor, contraction=True)

    def Q(value):
        return twin.compress(value).values

    x, h, g = x0.clone(), torch.zeros_like(x0), torch.zeros_like(x0)
    m = problem.grad(x)
    d = m + wd * x
    v = d.clone()
    for _ in range(STEPS):
        algo.step(problem.grad(algo.x), lr)
        for name, value in (("v", v), ("m", m), ("g", g)):
            torch.testing.assert_close(getattr(algo, name), value, rtol=0, atol=1e-10, msg=name)
        x = x + gamma * (L @ h) - lr * v
        h = h + Q(x - h)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-10)
        torch.testing.assert_close(algo.h, h, rtol=0, atol=1e-10)
        m = (1 - lam) * m + lam * problem.grad(x)
        d_next = m + wd * x
        v = v + gamma * (L @ g) + d_next - d
        g = g + Q(v - g)
        d = d_next


@pytest.mark.parametrize("compressor", ["rand:0.3", "qsgd:4"])
def test_lambda_one_is_beer_message_for_message(compressor):
    """m = ∇f each step (written so that λ = 1 is exact), so the iterates, copies and traffic are BEER's, bit for
    bit, random draws included; with the run's Nesterov momentum and weight decay on."""
    n = 8
    topo = make_topology("ring", n)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    motef = build("motef", topo, x0, compressor, {"gamma": 0.4, "lam": 1.0})
    beer = build("beer", topo, x0, compressor, {"gamma": 0.4})
    for _ in range(STEPS):
        ours, theirs = motef.step(problem.grad(motef.x), LR), beer.step(problem.grad(beer.x), LR)
        assert (ours.wire_bits, ours.paper_bits, ours.messages) == (theirs.wire_bits, theirs.paper_bits,
                                                                     theirs.messages)
        for name in ("x", "h", "v", "g"):
            assert torch.equal(getattr(motef, name), getattr(beer, name)), name


@pytest.mark.parametrize("spec, n, faults", TRACKER_CASES)
def test_the_tracker_keeps_the_average_direction_and_m_averages_the_gradients(spec, n, faults):
    """Per worker m_t = (1 − λ) m_{t−1} + λ ∇f(x^t) from m_0 = ∇f(x^0), whatever is sent; and the tracker gains
    d_t − d_{t−1} while (W − I)-type increments sum to zero over the workers (static W, the round's W_t, per-link
    copies that add a message at both ends, at neither when lost, when it lands if late), so mean(v_t) = mean(d_t)
    for every compressor MoTEF takes. (Its average then moves as SGD's: tests/test_keeping_the_average.py.)"""
    topo, problem, lam = make_topology(spec, n), Quadratic(n, D), 0.3
    for compressor in (c for c in AVERAGE_COMPRESSORS if takes(ALGORITHMS.get("motef"), c)):
        algo = build_method("motef", topo, start(n, identical=False), compressor, {"gamma": 0.4, "lam": lam}, faults)
        directions, lost, m = recording(algo), 0, None
        for _ in range(STEPS):
            grad = problem.grad(algo.x)
            m = grad if m is None else (1 - lam) * m + lam * grad
            lost += algo.step(grad, LR).link_lost
            torch.testing.assert_close(algo.m, m, rtol=0, atol=1e-12)
            tol = 1e-13 * max(1.0, float(algo.v.abs().max())) * len(directions)
            torch.testing.assert_close(algo.v.mean(0), directions[-1].mean(0), rtol=0, atol=tol)
        assert lost > 0 or faults is None


@functools.cache
def _dpsgd_error(steps: int, lr: float) -> float:
    n = 8
    problem = LeastSquares(n)
    dpsgd = build("dpsgd", make_topology("ring", n), torch.zeros(n, 10, dtype=torch.float64),
                  local_cfg=LocalStepConfig())
    for _ in range(steps):
        dpsgd.step(problem.grad(dpsgd.x), lr)
    return relative_error(dpsgd.x, problem.optimum)


# each contraction the suite has, with a γ it converges under on a ring of 8 (d = 10) and how close 400 steps get
REACHES = [("none", 1.0, 1e-12), ("top:0.3", 0.6, 1e-5), ("sign", 0.6, 1e-5), ("qsgd:2", 0.6, 1e-5),
           ("rand:0.5", 0.5, 1e-4)]


@pytest.mark.parametrize("compressor, gamma, tol", REACHES)
def test_on_non_iid_least_squares_motef_reaches_the_optimum_dpsgd_misses(compressor, gamma, tol):
    """Exact gradients, a minimiser per worker, the same constant step: D-PSGD settles away from the optimum of the
    mean objective; MoTEF's fixed point is that optimum (there m = ∇f_i, and the tracker's mean, the mean gradient,
    vanishes only at it), with exact messages to rounding and with compressed ones to a looser bound."""
    n, steps, lr = 8, 400, 0.1
    problem = LeastSquares(n)
    algo = build("motef", make_topology("ring", n), torch.zeros(n, 10, dtype=torch.float64), compressor,
                 {"gamma": gamma, "lam": 0.3}, local_cfg=LocalStepConfig())
    for _ in range(steps):
        algo.step(problem.grad(algo.x), lr)
    assert relative_error(algo.x, problem.optimum) < tol
    assert _dpsgd_error(steps, lr) > 0.1  # D-PSGD's bias, orders of magnitude above
