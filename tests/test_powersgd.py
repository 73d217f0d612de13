"""PowerSGD: where it compresses, Algorithm 1 of Vogels et al. written out by hand (warm start, error feedback),
and the traffic of its two all-reduces, in float64. All-reduce SGD, message for message, where low rank saves
nothing, error feedback only delaying what it drops, and rank one reaching the optimum under a decaying step:
tests/test_laws.py."""
import math

import pytest
import torch

from bench.algorithms import LocalStep, LocalStepConfig, make_algorithm
from bench.comm import SimulatedCommunicator, make_network
from bench.compressors.rows import RowStream
from bench.topology import make_topology
from test_algorithms import LR, Quadratic, assert_agrees, build, start

N = 8
# a conv kernel (6 × 12: compressed for R ≤ 3), its bias, a linear layer (5 × 4: compressed for R = 1, 2)
SHAPES = [(6, 3, 2, 2), (6,), (5, 4)]
SEGMENTS = [math.prod(s) for s in SHAPES]
D = sum(SEGMENTS)  # 72 + 6 + 20 = 98


def powersgd(x0, options=None, shapes=SHAPES, local_cfg=None, network=None):
    return build("powersgd", make_topology("ring", N), x0, "none", options, local_cfg, network=network,
                 segments=None if shapes is None else [math.prod(s) for s in shapes], shapes=shapes)


def test_plan_compresses_only_where_low_rank_saves_bits():
    assert [b[2:] for b in powersgd(start(N, D), {"rank": 2}).blocks] == [(6, 12), (5, 4)]
    assert [b[2:] for b in powersgd(start(N, D), {"rank": 3}).blocks] == [(6, 12)]  # 3·9 ≥ 20
    algo = powersgd(start(N, D), {"rank": 2}, shapes=None)  # one flat vector: a zero-padded 10 × 10
    assert [b[2:] for b in algo.blocks] == [(10, 10)] and algo.exact == []
    # R·(rows + cols) ≥ size for every layer, or only 1-D layers: all-reduce SGD (tests/test_laws.py)
    assert not powersgd(start(N, D), {"rank": 4}).blocks and not powersgd(start(N, D), {"rank": 1}, [(D,)]).blocks


def test_a_gradient_of_rank_at_most_r_passes_exactly():
    """If the mean of M has rank ≤ R on a layer, P̂ spans its columns and P̂ P̂ᵀ mean(M) = mean(M): the
    step is the exact mean step and nothing is left in the (mean) error."""
    g = torch.Generator().manual_seed(5)
    u = torch.randn(6, 2, generator=g, dtype=torch.float64)  # shared column space, worker-specific rows
    kernel = torch.einsum("ar,wrb->wab", u, torch.randn(N, 2, 12, generator=g, dtype=torch.float64))
    grad = torch.cat([kernel.reshape(N, -1), torch.randn(N, 26, generator=g, dtype=torch.float64)], dim=1)
    u2 = torch.randn(5, 1, generator=g, dtype=torch.float64)  # rank 1 on the linear layer
    grad[:, 78:] = (u2 @ torch.randn(N, 1, 4, generator=g, dtype=torch.float64)).reshape(N, 20)
    cfg = LocalStepConfig()
    algo = powersgd(start(N, D), {"rank": 2}, local_cfg=cfg)
    x0 = algo.x.clone()
    algo.step(grad, LR)
    torch.testing.assert_close(algo.x, x0 - LR * grad.mean(0), rtol=0, atol=1e-12)
    torch.testing.assert_close(algo.error.mean(0), torch.zeros(D, dtype=torch.float64), rtol=0, atol=1e-12)


def _gram_schmidt(p):
    """The orthonormal basis Gram–Schmidt gives: QR's, with signs making R's diagonal positive."""
    q, r = torch.linalg.qr(p)
    return q * torch.sign(torch.diagonal(r))


@pytest.mark.parametrize("rank", [1, 2])
def test_it_is_algorithm_one_of_the_paper_with_warm_start_and_error_feedback(rank):
    """Per layer, by hand on the matrices of all workers: M_i = g_i + e_i, P = mean(M_i Q), P̂ = orth(P),
    Q ← mean(M_iᵀ P̂) (kept for the next round: the warm start), Δ = P̂ Qᵀ, e_i = M_i − Δ; the 1-D layer
    exact; then the shared momentum step on Δ."""
    problem = Quadratic(N, D)
    cfg = LocalStepConfig(momentum=0.9, nesterov=True, weight_decay=1e-2)
    algo = powersgd(start(N, D), {"rank": rank}, local_cfg=cfg)
    ref_local = LocalStep(cfg)
    x, err = start(N, D).clone(), torch.zeros(N, D, dtype=torch.float64)
    blocks = algo.blocks
    assert torch.equal(algo.q, algo.q[:1].expand_as(algo.q))  # the same random Q on every worker
    qs, at = [], 0  # the initial Q of each block, the only thing taken from the module
    for b in blocks:
        qs.append(algo.q[0, at : at + b.cols * rank].reshape(b.cols, rank).clone())
        at += b.cols * rank
        torch.testing.assert_close(qs[-1].T @ qs[-1], torch.eye(rank, dtype=torch.float64), rtol=0, atol=1e-12)
    for _ in range(12):
        grad = problem.grad(x)
        m = grad + err
        update = m.mean(0, keepdim=True).expand(N, D).clone()  # the exact layers
        for k, b in enumerate(blocks):
            mats = m[:, b.start : b.start + b.size].reshape(N, b.rows, b.cols)
            p_hat = _gram_schmidt((mats @ qs[k]).mean(0))
            qs[k] = (mats.transpose(1, 2) @ p_hat).mean(0)
            approx = (p_hat @ qs[k].T).reshape(-1)
            update[:, b.start : b.start + b.size] = approx
            err[:, b.start : b.start + b.size] = m[:, b.start : b.start + b.size] - approx
        x = x - LR * ref_local.direction(x, update)
        algo.step(grad, LR)
        assert_agrees(algo, x=x, error=err, q=torch.cat([q.reshape(-1) for q in qs]).expand(N, -1))
    assert err.abs().sum() > 0


def test_the_two_all_reduces_carry_p_q_and_the_exact_layers():
    """Rank 2: the kernel's P is 6·2 and Q 12·2 floats, the linear layer's 5·2 and 4·2, the bias 6 floats
    exact. First all-reduce: bias + P's = 6 + 12 + 10 = 28 floats; second: Q's = 24 + 8 = 32 floats. Each
    worker sends 2(n − 1)/n of each (a ring all-reduce); each costs the α–β model's all-reduce time."""
    net = make_network("p2p-100m")
    algo = powersgd(start(N, D), {"rank": 2}, network=net)
    first = algo.step(Quadratic(N, D).grad(algo.x), LR)
    second = algo.step(Quadratic(N, D).grad(algo.x), LR)
    for traffic in (first, second):
        assert traffic.messages == 2
        assert traffic.paper_bits == 32 * (28 + 32) == 1920
        assert traffic.wire_bits == pytest.approx(2 * (N - 1) / N * 1920)
        assert traffic.comm_time_s == pytest.approx(net.allreduce_time(32 * 28, N) + net.allreduce_time(32 * 32, N))
    assert 1920 < 32 * D  # less than all-reduce SGD's 32·98 bits
    flat = powersgd(start(N, D), {"rank": 2}, shapes=None).step(Quadratic(N, D).grad(start(N, D)), LR)
    assert flat.paper_bits == 32 * (20 + 20) and flat.messages == 2  # P and Q of the padded 10 × 10


def test_every_worker_and_every_process_draws_the_same_first_q():
    """Q comes from the run's generator as a whole, not a worker's rows: a process holding rows 4..7 of a
    RowStream starts from the Q the single-process run starts from."""
    full = make_algorithm("powersgd", start(N, D), SimulatedCommunicator(make_topology("ring", N)),
                          generator=RowStream(torch.Generator().manual_seed(7), N, 0, N),
                          segments=SEGMENTS, shapes=SHAPES)
    part = make_algorithm("powersgd", start(N, D)[4:], SimulatedCommunicator(make_topology("ring", N)),
                          generator=RowStream(torch.Generator().manual_seed(7), N, 4, N),
                          segments=SEGMENTS, shapes=SHAPES)
    assert torch.equal(part.q, full.q[4:]) and torch.equal(full.q, full.q[:1].expand_as(full.q))
