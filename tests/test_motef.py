"""MoTEF (Islamov, Gao, Stich 2024, Algorithm 1): a step is Algorithm 1 written out, exact or with a compressor (with
the identity and γ = 1, gradient tracking of the momentum). The optimum D-PSGD misses, BEER at λ = 1 and its
tracker: tests/test_laws.py and tests/test_keeping_the_average.py."""
import pytest
import torch

from bench.algorithms import LocalStepConfig
from test_algorithms import STEPS, assert_agrees, written_out


@pytest.mark.parametrize("compressor, gamma", [("top:0.25", 0.4), ("sign", 0.4), ("none", 1.0)])
def test_a_step_is_algorithm_1_written_out(compressor, gamma):
    """Algorithm 1 in its own order and indices, with a compressor Q (deterministic, so both sides draw alike):
    x⁺ = x + γ(W − I)h − ηv, h⁺ = h + Q(x⁺ − h), m⁺ = (1 − λ)m + λ∇f(x⁺), v⁺ = v + γ(W − I)g + d⁺ − d,
    g⁺ = g + Q(v⁺ − g), with d = m + wd·x and v⁰ = d⁰. The module's step t takes ∇f(x^t) and leaves x^{t+1} and
    h^{t+1} beside v^t, m^t and g^t (BEER's reordering)."""
    lam, lr, wd = 0.3, 0.05, 1e-2
    algo, problem, x, W, Q = written_out("motef", compressor, {"gamma": gamma, "lam": lam},
                                         local_cfg=LocalStepConfig(weight_decay=wd))
    L = W - torch.eye(len(W), dtype=torch.float64)
    h, g = torch.zeros_like(x), torch.zeros_like(x)
    m = problem.grad(x)
    d = m + wd * x
    v = d.clone()
    for _ in range(STEPS):
        algo.step(problem.grad(algo.x), lr)
        assert_agrees(algo, 1e-10, v=v, m=m, g=g)
        x = x + gamma * (L @ h) - lr * v
        h = h + Q(x - h)
        assert_agrees(algo, 1e-10, x=x, h=h)
        m = (1 - lam) * m + lam * problem.grad(x)
        d_next = m + wd * x
        v = v + gamma * (L @ g) + d_next - d
        g = g + Q(v - g)
        d = d_next
