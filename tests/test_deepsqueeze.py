"""DeepSqueeze (the authors' form, epfml/ChocoSGD): its update written out by hand. D-PSGD with exact messages, one
message a round, gossip alone bringing the models together and the average: tests/test_laws.py and
tests/test_keeping_the_average.py."""
import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig
from bench.compressors import make_compressor
from bench.topology import make_topology
from test_algorithms import LR, Quadratic, build, start


@pytest.mark.parametrize("compressor", ["sign", "top:0.2", "rand:0.2", "qsgd:4"])
def test_the_update_is_the_authors_written_out(compressor):
    """With W as a matrix: x½ = x − η d; v = x½ + e; c = Q(v); e = v − c; x = x½ + γ (W c − c)."""
    n, d, gamma = 6, 12, 0.3
    topo = make_topology("ring", n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    problem, x0 = Quadratic(n, d), start(n, d, identical=False)
    algo = build("deepsqueeze", topo, x0, compressor, {"gamma": gamma}, local_cfg=LocalStepConfig())
    twin = make_compressor(compressor, contraction=ALGORITHMS.get("deepsqueeze").contraction)
    gen = torch.Generator().manual_seed(3)  # the module's generator's seed in build
    x, e = x0.clone(), torch.zeros_like(x0)
    for _ in range(10):
        half = x - LR * problem.grad(x)
        v = half + e
        c = twin.compress(v, gen).values
        e = v - c
        x = half + gamma * (W @ c - c)
        algo.step(problem.grad(algo.x), LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-12)
        torch.testing.assert_close(algo.error, e, rtol=0, atol=1e-12)
    assert algo.error.abs().sum() > 0 or compressor == "none"
