"""CEDAS (Huang & Pu, IEEE TAC 2023, Algorithm 1): compressed, it is LEAD's recursion from LEAD's second iterate,
its average moves as SGD's with the round's decayed step α_k. Exact diffusion with exact messages, the optimum D-PSGD
misses, one message a round and what it cannot run (a changing graph, lost messages): tests/test_laws.py."""
import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig
from bench.topology import make_topology
from test_algorithms import LR, STEPS, Quadratic, build, start
from test_keeping_the_average import COMPRESSORS as AVERAGE_COMPRESSORS
from test_keeping_the_average import build_method, recording, takes

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
        torch.testing.assert_close(cedas.x, lead.x, rtol=0, atol=1e-10)
        torch.testing.assert_close(cedas.h, lead.h, rtol=0, atol=1e-10)


def test_the_average_moves_as_sgd_with_the_decayed_step():
    """mean(φ̂ − φ̂_w) = 0 and mean(x − ψ) stays 0, so mean(x^{k+1}) = mean(x^k) − α_k mean(d_k) whatever is sent; under
    ``decaying`` α_k = lr·m/(k + m) (under ``constant`` α_k = lr: tests/test_keeping_the_average.py)."""
    n, m = 8, 4
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    for compressor in (c for c in AVERAGE_COMPRESSORS if takes(ALGORITHMS.get("cedas"), c)):
        algo = build_method("cedas", topo, start(n, identical=False), compressor,
                            {"mix_step": 0.6, "stepsize": "decaying", "decay_shift": m})
        directions = recording(algo)
        for k in range(STEPS):
            before = algo.x.mean(0).clone()
            algo.step(problem.grad(algo.x), LR)
            scale = max(1.0, float(algo.x.abs().max()), float(algo.psi.abs().max()))
            expected = before - LR * m / (k + m) * directions[-1].mean(0)
            torch.testing.assert_close(algo.x.mean(0), expected, rtol=0, atol=1e-13 * scale, msg=compressor)
