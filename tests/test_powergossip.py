"""PowerGossip in both forms: the published one (a warm-started basis per edge, one message per link) and the
shared-randomness one (``warm_start=false``, one broadcast). The per-edge updates of the authors' code written
out, the traffic, what the warm start buys on low-rank differences, and the graphs the published form refuses.
D-PSGD at full rank and γ = 1, gossip alone reaching consensus: tests/test_laws.py."""

import math

import numpy as np
import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.errors import BenchError
from bench.topology import make_topology
from bench.topology.links import Links
from test_algorithms import LR, Quadratic, build, start, written_out

# a 3×4 matrix, a bias, a 4×5 matrix, a 1×3 row: three layers compressed by rank, one exact
SEGMENTS = [12, 5, 20, 3]
SHAPES = [(3, 4), (5,), (4, 5), (1, 3)]
SHARED = {"warm_start": False}


def powergossip(topo, x0, options=None, local_cfg=None, segments=SEGMENTS, shapes=SHAPES):
    return build("powergossip", topo, x0, "none", options, local_cfg or LocalStepConfig(), segments=segments,
                 shapes=shapes)


def consensus_error(x):
    return float((x - x.mean(0)).norm())


def _gram_schmidt(m):
    """The authors' ``orthogonalize``: normalise each column, remove it from the ones after it."""
    m = m.clone()
    for i in range(m.shape[1]):
        m[:, i] /= m[:, i].norm()
        m[:, i + 1:] -= m[:, i : i + 1] * (m[:, i : i + 1] * m[:, i + 1:]).sum(0)
    return m


def _edge_bases(algo, links):
    """(i, j), i < j -> per block [P, Q], from the bases the module drew for link i → j (the same at both ends)."""
    sides, state = [(b.rows * b.rank, b.cols * b.rank) for b in algo.blocks], {}
    for (i, j), e in links.items():
        if i < j:
            torch.testing.assert_close(algo.edge_bases[e], algo.edge_bases[links[j, i]], rtol=0, atol=0)
            flat, state[i, j] = algo.edge_bases[e], []
            for (rp, cq), b in zip(sides, algo.blocks):
                state[i, j].append([flat[:rp].reshape(b.rows, b.rank), flat[rp : rp + cq].reshape(b.cols, b.rank)])
                flat = flat[rp + cq:]
    return state


@pytest.mark.parametrize("warm_start", [True, False])
@pytest.mark.parametrize("rank,gamma", [(1, 1.0), (2, 0.6), (3, 1.0)])
@pytest.mark.parametrize("gradient", [True, False])
def test_a_round_is_the_authors_per_edge_update(warm_start, rank, gamma, gradient):
    """The authors' PowerGossip.step written over the edges (i, j), i < j: on odd (right) rounds a basis B of the
    columns, D = (X_j − X_i) B, X_i += γ w_ij D Bᵀ and X_j −= γ w_ij D Bᵀ; on even (left) rounds the same with
    B of the rows on the left. Published form (warm_start=True): B is the edge's last D, orthonormalised by
    Gram–Schmidt (the module by QR: the same subspaces); shared form (synchronized_randomness): B is the round's
    shared draw. 1-D tensors by exact gossip; then the SGD step."""
    n, options = 6, {"rank": rank, "gamma": gamma, "warm_start": warm_start}
    algo, problem, x, W, _ = written_out("powergossip", "none", options, d=sum(SEGMENTS), segments=SEGMENTS,
                                         shapes=SHAPES)
    assert [(b.rows, b.cols, b.rank) for b in algo.blocks] == [(3, 4, min(rank, 3)), (4, 5, min(rank, 4)),
                                                               (1, 3, 1)]
    links = Links.of(W.numpy())
    state = _edge_bases(algo, {(int(s), int(t)): e for e, (s, t) in enumerate(zip(links.src, links.dst))}
                        ) if warm_start else None
    assert (algo.edge_bases is None) is not warm_start
    for t in range(8):
        right, shared = t % 2 == 1, None if warm_start else iter(algo.bases(algo.t))
        new, start_, blocks = x.clone(), 0, iter(range(len(algo.blocks)))
        for size, shape in zip(SEGMENTS, SHAPES):
            piece = slice(start_, start_ + size)
            if len(shape) == 1:
                new[:, piece] += gamma * (W @ x[:, piece] - x[:, piece])
            else:
                k, mats = next(blocks), x[:, piece].reshape(n, *shape)
                p = None if warm_start else next(shared)
                for i, j in ((i, j) for i in range(n) for j in range(i + 1, n) if W[i, j] > 0):
                    basis = _gram_schmidt(state[i, j][k][1 if right else 0]) if warm_start else p
                    diff = mats[j] - mats[i]
                    low = diff @ basis if right else diff.T @ basis
                    approx = (low @ basis.T if right else basis @ low.T).reshape(-1)
                    new[i, piece] += gamma * W[i, j] * approx
                    new[j, piece] -= gamma * W[i, j] * approx
                    if warm_start:
                        state[i, j][k][0 if right else 1] = low
            start_ += size
        x = new - LR * problem.grad(x) if gradient else new
        algo.step(problem.grad(algo.x) if gradient else None, LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-10)


def test_both_ends_of_an_edge_keep_the_same_bases_bit_for_bit():
    """Each end forms the difference oriented from the lower id from the same two messages (b − a at one end is
    −(a − b) at the other, exactly), so the two copies of an edge's bases never drift apart (float32); edges
    differ; round 0 gossips equal models, and the first random bases are kept (an exactly zero column keeps the
    previous one) instead of collapsing to nothing or to coordinate axes."""
    n, d = 9, sum(SEGMENTS)
    problem = Quadratic(n, d)
    equal = powergossip(make_topology("ring", 8), start(8, d), {"rank": 2})
    first = equal.edge_bases.clone()
    equal.step(None, LR)
    assert torch.equal(equal.edge_bases, first)
    algo = powergossip(make_topology("torus", n), start(n, d, identical=False).float(), {"rank": 2},
                       LocalStepConfig(momentum=0.9))
    back = algo.comm.links().links.reverse()
    for _ in range(8):
        algo.step(problem.grad(algo.x.double()).float(), LR)
        assert torch.equal(algo.edge_bases, algo.edge_bases[back])
    assert len({tuple(row.tolist()) for row in algo.edge_bases}) == algo.edge_bases.shape[0] // 2


def differences(n, side, rank, noise, seed=0):
    """Models M + U C_i Vᵀ + noise·N_i (Gaussian): differences of rank ``rank``, in one subspace, up to the noise."""
    g = torch.Generator().manual_seed(seed)
    draw = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    m, u, v = draw(side, side), draw(side, rank), draw(side, rank)
    return torch.stack([(m + u @ draw(rank, rank) @ v.T + noise * draw(side, side)).reshape(-1) for _ in range(n)])


def gossip_alone(x0, options, rounds):
    """Consensus error after ``rounds`` rounds relative to the start, and the bits each worker sent."""
    side = math.isqrt(x0.shape[1])
    algo = powergossip(make_topology("ring", x0.shape[0]), x0, options, segments=[x0.shape[1]], shapes=[(side, side)])
    bits = np.zeros(x0.shape[0])
    for _ in range(rounds):
        bits += algo.step(None, 0.0).worker_bits
    return consensus_error(algo.x) / consensus_error(x0), bits


@pytest.mark.parametrize("difference_rank,noise,rank,factor", [(2, 1e-2, 2, 10.0), (0, 1.0, 1, 2.0)])
def test_the_warm_start_goes_further_on_the_same_bits(difference_rank, noise, rank, factor):
    """A ring of 8, one 16×16 layer, 400 rounds of gossip alone, the same rank in both forms: both send
    r·16 floats on each link each round, so each worker sends the same bits. Differences of rank ≈ 2 (1 % noise)
    with r = 2: the per-edge power iteration finds them and ends 1,230× closer to consensus (118× to 1,230× over
    seeds 0–4); with i.i.d. full-rank differences and r = 1, 3.2× closer (3.2× to 3.9×)."""
    x0 = differences(8, 16, difference_rank, noise)
    warm, warm_bits = gossip_alone(x0, {"rank": rank}, 400)
    shared, shared_bits = gossip_alone(x0, {"rank": rank, **SHARED}, 400)
    np.testing.assert_array_equal(warm_bits, shared_bits)
    assert warm_bits[0] == 400 * 2 * 32 * rank * 16
    assert shared > factor * warm, (shared, warm)


@pytest.mark.parametrize("rank,floats", [(1, (17, 13)), (2, (26, 20))])
@pytest.mark.parametrize("spec,n,degrees", [("ring", 8, [2] * 8), ("star", 6, [5, 1, 1, 1, 1, 1])])
def test_traffic_is_one_low_rank_message_per_link(rank, floats, spec, n, degrees):
    """By hand: a message is the bias (5) plus r·cols on even (left) rounds, r·rows on odd ones, of the 3×4, 4×5
    and 1×3 layers (r capped by the 1×3's one row): r = 1 sends 5 + 4 + 5 + 3 = 17 or 5 + 3 + 4 + 1 = 13 floats,
    r = 2 sends 5 + 8 + 10 + 3 = 26 or 5 + 6 + 8 + 1 = 20. The published form sends one such message on each
    out-link (a different one each); the shared form gossips one, a copy per link: the same bits per worker."""
    topo = make_topology(spec, n)
    d = sum(SEGMENTS)
    degrees = np.array(degrees, dtype=float)
    for options in ({"rank": rank}, {"rank": rank, **SHARED}):
        algo, problem = powergossip(topo, start(n, d), options), Quadratic(n, d)
        for t in range(4):
            traffic = algo.step(problem.grad(algo.x), LR)
            bits = 32 * floats[t % 2]
            assert traffic.messages == 1
            np.testing.assert_array_equal(traffic.worker_bits, degrees * bits)
            assert traffic.wire_bits == pytest.approx(degrees.mean() * bits)
            assert traffic.wire_bits_max == degrees.max() * bits
            # the paper's count: each distinct message once (one per link), or the one broadcast payload
            distinct = degrees.mean() if options.get("warm_start", True) else 1
            assert traffic.paper_bits == pytest.approx(distinct * bits)
            assert traffic.comm_time_s > 0


@pytest.mark.parametrize("spec", ["one-peer-exp", "base:1", "base:3"])
def test_the_refusal_on_a_time_varying_graph_says_what_the_graph_does(spec):
    """Base-(k+1) graphs' rounds are groups that exchange both ways, but change from round to round: the line
    says that, not that links go one way."""
    topo = make_topology(spec, 8)
    assert topo.time_varying
    with pytest.raises(BenchError) as refused:
        build("powergossip", topo, start(8, identical=False), "none", {})
    line = str(refused.value)
    assert "\n" not in line and "changes its links from round to round" in line and "one way" not in line
    assert f"topology {spec!r}" in line and "warm_start=false" in line
