"""LEAD (Liu et al., ICLR 2021, Algorithm 1): with the identity and γ = 1 it is NIDS step by step, on heterogeneous
least squares it removes the bias D-PSGD keeps (exact or with the unbiased operators its analysis takes), its dual
sums to zero so the average moves as SGD's even when the step changes, one compressed message a round, and what it
cannot take (a bad knob, a changing graph, a lossy network, no step) is one line."""

import math

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig, make_algorithm
from bench.cli import main
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.faults import parse_faults
from bench.topology import make_topology
from test_algorithms import LR, STEPS, TOPOLOGIES, Quadratic, build, start
from test_beer import LeastSquares, relative_error
from test_keeping_the_average import COMPRESSORS as AVERAGE_COMPRESSORS
from test_keeping_the_average import build_method, recording, takes

D = 40


@pytest.mark.parametrize("spec,n", TOPOLOGIES)
def test_identity_compression_and_gamma_one_is_nids(spec, n):
    """Ŷ = Y and Ŷ_w = W Y whatever α is, so X^{k+1} = W̄ Y^k with W̄ = (I + W)/2, which with D eliminated is NIDS:
    X¹ = X⁰ − η d₀ (a local step), X^{k+1} = W̄ (2X^k − X^{k−1} − η(d_k − d_{k−1})); the dual in gradient units is
    D^{k+1} = (X^k − η d_k − X^{k+1})/η."""
    topo = make_topology(spec, n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    W_bar = (torch.eye(n, dtype=torch.float64) + W) / 2
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    wd = 1e-2
    algo = build("lead", topo, x0, "none", {"dual_step": 1.0, "copy_step": 0.3},
                 local_cfg=LocalStepConfig(weight_decay=wd))
    x, previous, d_previous = x0.clone(), None, None
    for k in range(STEPS):
        d = problem.grad(x) + wd * x
        x_next = x - LR * d if k == 0 else W_bar @ (2 * x - previous - LR * (d - d_previous))
        algo.step(problem.grad(algo.x), LR)
        torch.testing.assert_close(algo.x, x_next, rtol=0, atol=1e-10)
        if k > 0:
            torch.testing.assert_close(algo.dual, (x - LR * d - x_next) / LR, rtol=0, atol=1e-8)
        previous, x, d_previous = x, x_next, d


def test_on_non_iid_least_squares_dpsgd_keeps_a_bias_that_lead_removes():
    """Constant step, exact gradients, a minimiser per worker: D-PSGD settles away from the optimum of the mean
    objective; LEAD's fixed point is consensual at that optimum, its dual at −∇f_i(x*). Exact messages, and the
    unbiased operators of the paper's analysis (QSGD's unbiased form, rand-k scaled by d/k); γ shrinks with the
    operator's variance C (rand:0.5 has C = 1), as the paper's bound on γ does."""
    n, steps, lr = 8, 400, 0.1
    topo, problem = make_topology("ring", n), LeastSquares(n)
    x0 = torch.zeros(n, 10, dtype=torch.float64)
    dpsgd = build("dpsgd", topo, x0, local_cfg=LocalStepConfig())
    for _ in range(steps):
        dpsgd.step(problem.grad(dpsgd.x), lr)
    bias = relative_error(dpsgd.x, problem.optimum)
    assert bias > 0.1
    optimum = problem.optimum.expand(n, -1)
    for compressor, gamma, bound in [("none", 1.0, 1e-6), ("qsgd:4", 1.0, 1e-5), ("qsgd:2", 0.5, 1e-5),
                                     ("rand:0.5,unbiased=true", 0.5, 1e-5)]:
        assert make_compressor(compressor, contraction=ALGORITHMS.get("lead").contraction).unbiased
        lead = build("lead", topo, x0, compressor, {"dual_step": gamma}, local_cfg=LocalStepConfig())
        for _ in range(steps):
            lead.step(problem.grad(lead.x), lr)
        error = relative_error(lead.x, problem.optimum)
        assert error < bound and error < 1e-4 * bias, (compressor, error)
        scale = float(problem.grad(optimum).norm())
        assert float((lead.dual + problem.grad(optimum)).norm()) < 1e-4 * scale, compressor


def test_the_dual_sums_to_zero_and_the_average_moves_as_sgd_when_the_step_changes():
    """mean(Ŷ − Ŷ_w) = 0 for a doubly stochastic W, so mean(D) stays 0 whatever is sent, and
    mean(X^{k+1}) = mean(X^k) − η_k mean(d_k) with a step that changes every round (D is in gradient units, so a
    schedule's step scales only this round's dual step)."""
    n = 8
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    for compressor in (c for c in AVERAGE_COMPRESSORS if takes(ALGORITHMS.get("lead"), c)):
        algo = build_method("lead", topo, start(n, identical=False), compressor, {"dual_step": 0.6})
        directions = recording(algo)
        for t in range(STEPS):
            lr = LR * (1 + 0.5 * math.sin(t))
            before = algo.x.mean(0).clone()
            algo.step(problem.grad(algo.x), lr)
            scale = max(1.0, float(algo.dual.abs().max()), float(algo.x.abs().max()))
            torch.testing.assert_close(algo.dual.mean(0), torch.zeros(D, dtype=torch.float64), rtol=0,
                                       atol=1e-13 * scale * (t + 1), msg=compressor)
            expected = before - lr * directions[-1].mean(0)
            torch.testing.assert_close(algo.x.mean(0), expected, rtol=0, atol=1e-13 * scale, msg=compressor)


@pytest.mark.parametrize("compressor", ["none", "sign", "top:0.1", "qsgd:4"])
def test_one_compressed_message_a_round_none_in_the_first(compressor):
    """Step 1 is X¹ = X⁰ − η d₀ (line 2 of Algorithm 1), local; from then on Q travels once a round."""
    n, segments = 8, [10, 30]
    topo = make_topology("ring", n)
    comp = make_compressor(compressor, contraction=ALGORITHMS.get("lead").contraction)
    algo = make_algorithm("lead", start(n), SimulatedCommunicator(topo), compressor=comp,
                          generator=torch.Generator().manual_seed(0), segments=segments)
    problem = Quadratic(n, D)
    wire, paper = 2 * 8 * math.ceil(comp.wire_bits(segments) / 8), comp.paper_bits(segments)  # both ring links
    for k in range(4):
        traffic = algo.step(problem.grad(algo.x), LR)
        assert traffic.messages == (0 if k == 0 else 1)
        assert traffic.wire_bits == (0 if k == 0 else wire) and traffic.paper_bits == (0 if k == 0 else paper)


def test_what_it_cannot_run_is_refused_in_one_line(tmp_path, capsys):
    """A bad knob through the command line (exit 2, one line), a changing graph and a lossy network (its copies' mix
    W·H holds for a fixed W, and it has no rule for a lost message), and no step (the dual step divides by η)."""
    cls = ALGORITHMS.get("lead")
    status = main(["run", "--task", "lsq", "--algorithm", "lead", "--nodes", "4", "--epochs", "1", "--quiet",
                   "--set", "algorithm_options.dual_step=2", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert status == 2 and "\n" not in err and "dual_step=2" in err
    for refuse in (lambda: cls.check_topology("one-peer-exp", True),
                   lambda: cls.check_faults(parse_faults({"drop": 0.1}, 8)),
                   lambda: build("lead", make_topology("ring", 4), start(4)).step(None, 0.0)):
        with pytest.raises(BenchError) as refused:
            refuse()
        assert "\n" not in str(refused.value) and "lead" in str(refused.value)
    cls.check_topology("ring", False)  # a static graph is fine
