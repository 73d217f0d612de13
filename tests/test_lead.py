"""LEAD (Liu et al., ICLR 2021, Algorithm 1): at the optimum its dual is −∇f_i(x*), and a round without a step is
refused. NIDS with exact messages, the optimum D-PSGD misses, no message in its first round, what it cannot run,
its average under a changing step: tests/test_laws.py and tests/test_keeping_the_average.py."""
import pytest

from bench.algorithms import ALGORITHMS
from bench.errors import BenchError
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


def test_without_a_step_it_refuses_in_one_line():
    """Its dual step divides by η: a round without a gradient (η = 0) is refused."""
    with pytest.raises(BenchError) as refused:
        build("lead", make_topology("ring", 4), start(4)).step(None, 0.0)
    assert "\n" not in str(refused.value) and "lead" in str(refused.value)
