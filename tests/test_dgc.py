"""DGC: the paper's per-worker bookkeeping written out by hand (with factor masking and every coordinate sent:
all-reduce SGD without momentum), and the traffic of an all-gather, in float64. All-reduce SGD without factor
masking, nothing accumulated lost (only late), the optimum under a decaying step without factor masking:
tests/test_laws.py."""
import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.comm import make_network
from bench.errors import BenchError
from bench.topology import make_topology
from test_algorithms import LR, Quadratic, assert_agrees, build, start

N, D = 8, 40
HEAVY_BALL = LocalStepConfig(momentum=0.9, weight_decay=1e-2)
NESTEROV = LocalStepConfig(momentum=0.9, nesterov=True, weight_decay=1e-2)


def dgc(compressor, options=None, local_cfg=HEAVY_BALL, **kwargs):
    return build("dgc", make_topology("ring", N), start(N), compressor, options, local_cfg=local_cfg, **kwargs)


@pytest.mark.parametrize("cfg", [HEAVY_BALL, NESTEROV], ids=["heavy-ball", "nesterov"])
@pytest.mark.parametrize("factor_masking", [True, False])
@pytest.mark.parametrize("fraction", [0.2, 1.0])
def test_it_is_the_papers_bookkeeping_worker_by_worker(cfg, factor_masking, fraction):
    """Lin et al., Algorithm with momentum correction and factor masking, per worker with torch.topk on
    each layer: g = ∇ + wd·x; u ← μu + g, v ← v + u (Nesterov: u ← μ(u + g), v ← v + u + g); send the
    top-k of v per layer; zero v (and u) there; x ← x − η·mean of what was sent. Sending everything with factor
    masking resets u every round: all-reduce SGD without momentum."""
    segments = [10, 30]
    problem = Quadratic(N, D)
    algo = dgc(f"top:{fraction}", {"factor_masking": factor_masking}, cfg, segments=segments)
    x = start(N).clone()
    u, v = torch.zeros(N, D, dtype=torch.float64), torch.zeros(N, D, dtype=torch.float64)
    mu, wd = cfg.momentum, cfg.weight_decay
    for _ in range(20):
        grad = problem.grad(x)
        sent = torch.zeros(N, D, dtype=torch.float64)
        for i in range(N):
            g = grad[i] + wd * x[i]
            if cfg.nesterov:
                u[i] = mu * (u[i] + g)
                v[i] = v[i] + u[i] + g
            else:
                u[i] = mu * u[i] + g
                v[i] = v[i] + u[i]
            at = 0
            for size in segments:
                top = v[i, at : at + size].abs().topk(int(fraction * size)).indices + at
                sent[i, top] = v[i, top]
                v[i, top] = 0.0
                if factor_masking:
                    u[i, top] = 0.0
                at += size
        x = x - LR * sent.mean(0)
        algo.step(grad, LR)
        assert_agrees(algo, x=x, v=v, u=u)
    assert (algo.v.abs().sum() > 0) == (fraction < 1) and torch.equal(algo.x, algo.x[:1].expand_as(algo.x))


def test_the_all_gather_is_priced_by_the_alpha_beta_model():
    """top:0.1 per layer of [10, 30]: k = 1 and 3. Wire: 1·(32 + 4) + 3·(32 + 5) = 147 bits per message, sent
    as 19 bytes (152 bits) and forwarded to the n − 1 others; paper: 64 bits per kept entry = 256."""
    net = make_network("p2p-100m")
    algo = dgc("top:0.1", network=net, segments=[10, 30])
    for _ in range(2):
        traffic = algo.step(Quadratic(N, D).grad(algo.x), LR)
        assert traffic.messages == 1
        assert traffic.wire_bits == (N - 1) * 152 and traffic.paper_bits == 256
        assert traffic.comm_time_s == pytest.approx(net.allgather_time(152, N))
        assert traffic.comm_time_s == pytest.approx((N - 1) * (net.latency_s + 152 / net.bandwidth_bps))
    assert algo.step(None, LR).wire_bits == 0  # no gradient, nothing to send


@pytest.mark.parametrize("compressor", ["sign", "qsgd:4", "none", "rand:0.1,unbiased=true"])
def test_it_refuses_operators_that_do_not_send_coordinates_of_v(compressor):
    with pytest.raises(BenchError, match="top:0.01") as info:
        dgc(compressor)
    assert "\n" not in str(info.value)
