"""LEAD (Liu et al., ICLR 2021, Algorithm 1): on heterogeneous least squares it removes the bias D-PSGD keeps (exact
or with the unbiased operators its analysis takes) and its dual settles at −∇f_i(x*), and what it cannot take (a bad
knob, a changing graph, a lossy network, no step) is one line. NIDS with exact messages, no message in its first
round, its average under a changing step: tests/test_laws.py and tests/test_keeping_the_average.py."""
import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig
from bench.cli import main
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.faults import parse_faults
from bench.topology import make_topology
from test_algorithms import build, start
from test_beer import LeastSquares, relative_error


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
