"""LEAD (Liu et al., ICLR 2021, Algorithm 1): at the optimum its dual is −∇f_i(x*), and what it cannot take (a bad
knob, a changing graph, a lossy network, no step) is one line. NIDS with exact messages, the optimum D-PSGD misses,
no message in its first round, its average under a changing step: tests/test_laws.py and
tests/test_keeping_the_average.py."""
import pytest

from bench.algorithms import ALGORITHMS
from bench.cli import main
from bench.errors import BenchError
from bench.faults import parse_faults
from bench.topology import make_topology
from test_algorithms import build, start
from test_laws import settle


@pytest.mark.parametrize("compressor, options", ALGORITHMS.get("lead").exact_optimum)
def test_at_the_optimum_the_dual_is_minus_each_workers_gradient(compressor, options):
    """The fixed point is consensual at the optimum of the mean objective (tests/test_laws.py), its dual at
    −∇f_i(x*), exact or with the unbiased operators of the paper's analysis."""
    lead, problem, _ = settle("lead", compressor, options)
    target = -problem.grad(problem.optimum.expand(lead.x.shape[0], -1))
    assert float((lead.dual - target).norm()) < 1e-6 * float(target.norm())


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
