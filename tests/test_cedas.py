"""CEDAS (Huang & Pu, IEEE TAC 2023, Algorithm 1): compressed, it is LEAD's recursion from LEAD's second iterate.
Exact diffusion with exact messages (under the decaying step α_k = lr·m/(k + m) too), the optimum D-PSGD misses, one
message a round and what it cannot run (a changing graph, lost messages): tests/test_laws.py; its average moving as
SGD's whatever is sent: tests/test_keeping_the_average.py."""
import pytest

from bench.algorithms import LocalStepConfig
from bench.topology import make_topology
from test_algorithms import LR, STEPS, Quadratic, assert_agrees, build, start

D = 40


@pytest.mark.parametrize("compressor,gamma", [("top:0.3", 1.0), ("rand:0.5,unbiased=true", 0.5)])
def test_with_a_constant_step_it_is_lead_from_leads_second_iterate(compressor, gamma):
    """φ^{k+1} = 2x^k − x^{k−1} − η(d_k − d_{k−1}) is LEAD's Y^k, and both combine as Y − (γ/2)(Ŷ − Ŷ_w) with the same
    copies: CEDAS started at LEAD's X¹ (its ψ⁰ = X¹, so φ¹ = X¹ − η d₁ = Y¹) follows LEAD's iterates, compressed
    (LEAD's local first step draws nothing, so a random operator draws the same coordinates in both)."""
    n = 8
    topo, problem, x0 = make_topology("ring", n), Quadratic(n, D), start(n, identical=False)
    cfg = LocalStepConfig()
    lead = build("lead", topo, x0, compressor, {"dual_step": gamma, "copy_step": 0.3}, local_cfg=cfg)
    lead.step(problem.grad(lead.x), LR)
    cedas = build("cedas", topo, lead.x, compressor, {"mix_step": gamma, "copy_step": 0.3}, local_cfg=cfg)
    for _ in range(STEPS):
        lead.step(problem.grad(lead.x), LR)
        cedas.step(problem.grad(cedas.x), LR)
        assert_agrees(cedas, 1e-10, x=lead.x, h=lead.h)
