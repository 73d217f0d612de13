"""PowerGossip in both forms: the published one (a warm-started basis per edge, one message per link) and the
shared-randomness one (``warm_start=false``, one broadcast). The per-edge updates of the authors' code written
out, the traffic, checkpoints, what the warm start buys on low-rank differences, and the graphs the published form
refuses. D-PSGD at full rank and γ = 1: tests/test_laws.py."""

import math

import numpy as np
import pytest
import torch

from bench.algorithms import LocalStep, LocalStepConfig, make_algorithm, parse_options
from bench.comm import SimulatedCommunicator
from bench.errors import BenchError
from bench.topology import make_topology
from bench.topology.links import Links
from hostile import assert_refused
from test_algorithms import LR, Quadratic, build, start, trajectory

D = 40
# a 3×4 matrix, a bias, a 4×5 matrix, a 1×3 row: three layers compressed by rank, one exact
SEGMENTS = [12, 5, 20, 3]
SHAPES = [(3, 4), (5,), (4, 5), (1, 3)]
SHARED = {"warm_start": False}


def powergossip(topo, x0, options=None, segments=None, shapes=None, local_cfg=None):
    return make_algorithm("powergossip", x0, SimulatedCommunicator(topo), local=LocalStep(local_cfg),
                          options=options, generator=torch.Generator().manual_seed(3), segments=segments,
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


@pytest.mark.parametrize("rank,gamma", [(1, 1.0), (2, 0.6), (3, 1.0)])
@pytest.mark.parametrize("gradient", [True, False])
def test_the_warm_started_update_is_the_authors_per_edge_power_iteration(rank, gamma, gradient):
    """The authors' PowerGossip.step (warm_start=True) written over the edges: each edge (i, j), i < j, holds
    P (rows × r) and Q (cols × r); on odd rounds it orthonormalises Q (Gram–Schmidt), forms the difference
    D = (X_j − X_i) Q, applies X_i += γ w_ij D Qᵀ and X_j −= γ w_ij D Qᵀ, and D becomes P; on even rounds the same
    with P and D = (X_j − X_i)ᵀ P, and D becomes Q. 1-D tensors by exact gossip; then the SGD step. The module
    orthonormalises by QR: the same subspaces, so the same models."""
    n = 6
    topo = make_topology("ring", n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    d = sum(SEGMENTS)
    problem, x0 = Quadratic(n, d), start(n, d, identical=False)
    algo = powergossip(topo, x0, {"rank": rank, "gamma": gamma}, SEGMENTS, SHAPES, LocalStepConfig())
    links = Links.of(topo.W)
    link = {(int(s), int(t)): e for e, (s, t) in enumerate(zip(links.src, links.dst))}
    sides = [(b.rows * b.rank, b.cols * b.rank) for b in algo.blocks]
    state = {}  # (i, j) -> per block [P, Q], from the bases the module drew for link i → j
    for (i, j), e in link.items():
        if i < j:
            torch.testing.assert_close(algo.edge_bases[e], algo.edge_bases[link[j, i]], rtol=0, atol=0)
            flat, state[i, j] = algo.edge_bases[e], []
            for (rp, cq), b in zip(sides, algo.blocks):
                state[i, j].append([flat[:rp].reshape(b.rows, b.rank), flat[rp : rp + cq].reshape(b.cols, b.rank)])
                flat = flat[rp + cq:]
    x = x0.clone()
    for t in range(8):
        right = t % 2 == 1
        grad = problem.grad(x) if gradient else None
        new = x.clone()
        start_, blocks = 0, iter(range(len(algo.blocks)))
        for size, shape in zip(SEGMENTS, SHAPES):
            piece = slice(start_, start_ + size)
            if len(shape) == 1:
                new[:, piece] += gamma * (W @ x[:, piece] - x[:, piece])
            else:
                k = next(blocks)
                mats = x[:, piece].reshape(n, *shape)
                for (i, j), bases in state.items():
                    basis = _gram_schmidt(bases[k][1 if right else 0])
                    diff = mats[j] - mats[i]
                    low = diff @ basis if right else diff.T @ basis
                    approx = low @ basis.T if right else basis @ low.T
                    new[i, piece] += gamma * W[i, j] * approx.reshape(-1)
                    new[j, piece] -= gamma * W[i, j] * approx.reshape(-1)
                    bases[k][0 if right else 1] = low
            start_ += size
        x = new if grad is None else new - LR * grad
        algo.step(problem.grad(algo.x) if gradient else None, LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-10)


def test_both_ends_of_an_edge_keep_the_same_bases_bit_for_bit():
    """Each end forms the difference oriented from the lower id from the same two messages (b − a at one end is
    −(a − b) at the other, exactly), so the two copies of an edge's bases never drift apart; edges differ."""
    n, d = 9, sum(SEGMENTS)
    problem = Quadratic(n, d)
    algo = powergossip(make_topology("torus", n), start(n, d, identical=False).float(), {"rank": 2}, SEGMENTS,
                       SHAPES, LocalStepConfig(momentum=0.9))
    back = algo.comm.links().links.reverse()
    for _ in range(8):
        algo.step(problem.grad(algo.x.double()).float(), LR)
        assert torch.equal(algo.edge_bases, algo.edge_bases[back])
    assert len({tuple(row.tolist()) for row in algo.edge_bases}) == algo.edge_bases.shape[0] // 2


def test_equal_models_keep_the_first_bases():
    """Round 0 of training gossips equal models: every difference is 0, and the first random bases are kept
    (an exactly zero column keeps the previous one) instead of collapsing to nothing or to coordinate axes."""
    n, d = 8, sum(SEGMENTS)
    algo = powergossip(make_topology("ring", n), start(n, d), {"rank": 2}, SEGMENTS, SHAPES)
    first = algo.edge_bases.clone()
    algo.step(None, LR)
    torch.testing.assert_close(algo.edge_bases, first, rtol=0, atol=0)
    algo.step(Quadratic(n, d).grad(algo.x), LR)  # now the models differ and the bases move
    algo.step(None, LR)
    assert not torch.equal(algo.edge_bases, first)


def test_each_round_moves_every_model_inside_the_rounds_shared_subspace():
    """Shared randomness, rank 1, a flat vector of 49 (a 7×7 matrix), no gradient: on an even (left) round every
    model's change is P·(row), on an odd (right) round (column)·Pᵀ — rank one, along the same P for all."""
    n = 8
    algo = build("powergossip", make_topology("ring", n), start(n, 49, identical=False), "none",
                 {"rank": 1, **SHARED})
    for _ in range(4):
        (p,) = algo.bases(algo.t)
        right = algo.t % 2 == 1
        before = algo.x.clone()
        algo.step(None, LR)
        change = (algo.x - before).view(n, 7, 7)
        projected = change @ p @ p.T if right else p @ p.T @ change
        torch.testing.assert_close(projected, change, rtol=0, atol=1e-12)
        assert all(int(torch.linalg.matrix_rank(c)) <= 1 for c in change)


@pytest.mark.parametrize("rank,gamma", [(1, 1.0), (2, 0.6), (3, 1.0)])
@pytest.mark.parametrize("gradient", [True, False])
def test_the_shared_form_is_the_authors_per_edge_update_with_a_shared_projection(rank, gamma, gradient):
    """The authors' PowerGossip.step (synchronized_randomness=True, warm_start=False) written over the edges,
    with every edge's P the round's shared one: on odd rounds each edge (i, j), i > j, forms q = (X_i − X_j) P and
    X_i −= γ w_ij q Pᵀ, X_j += γ w_ij q Pᵀ; on even rounds the same with Pᵀ (X_i − X_j) on the left; 1-D tensors
    by exact gossip; then the SGD step."""
    n = 6
    topo = make_topology("ring", n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    d = sum(SEGMENTS)
    problem, x0 = Quadratic(n, d), start(n, d, identical=False)
    algo = powergossip(topo, x0, {"rank": rank, "gamma": gamma, **SHARED}, SEGMENTS, SHAPES, LocalStepConfig())
    assert [(b.rows, b.cols, b.rank) for b in algo.blocks] == [(3, 4, min(rank, 3)), (4, 5, min(rank, 4)),
                                                               (1, 3, 1)]
    assert algo.edge_bases is None
    x = x0.clone()
    for t in range(8):
        bases = algo.bases(algo.t)
        grad = problem.grad(x) if gradient else None
        new = x.clone()
        start_ = 0
        blocks = iter(zip(algo.blocks, bases))
        for size, shape in zip(SEGMENTS, SHAPES):
            piece = slice(start_, start_ + size)
            if len(shape) == 1:
                new[:, piece] += gamma * (W @ x[:, piece] - x[:, piece])
            else:
                _, p = next(blocks)
                mats = x[:, piece].reshape(n, *shape)
                for i in range(n):
                    for j in range(i):
                        if W[i, j] == 0:
                            continue
                        diff = mats[i] - mats[j]
                        approx = (diff @ p) @ p.T if t % 2 == 1 else p @ (p.T @ diff)
                        new[i, piece] -= gamma * W[i, j] * approx.reshape(-1)
                        new[j, piece] += gamma * W[i, j] * approx.reshape(-1)
            start_ += size
        x = new if grad is None else new - LR * grad
        algo.step(problem.grad(algo.x) if gradient else None, LR)
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-12)


# the average moves as SGD's in both forms, per layer and flat: tests/test_keeping_the_average.py


@pytest.mark.parametrize("warm_start", [True, False])
def test_rank_one_gossip_alone_reaches_consensus(warm_start):
    n = 8
    algo = build("powergossip", make_topology("ring", n), start(n, identical=False), "none",
                 {"rank": 1, "warm_start": warm_start})
    mean = algo.x.mean(0)
    spread = consensus_error(algo.x)
    for _ in range(600):
        algo.step(None, LR)
    torch.testing.assert_close(algo.x.mean(0), mean, rtol=0, atol=1e-12)
    assert consensus_error(algo.x) < 1e-3 * spread


def differences(n, side, rank, noise, seed=0):
    """Models M + U C_i Vᵀ + noise·N_i (Gaussian): differences of rank ``rank``, in one subspace, up to the noise."""
    g = torch.Generator().manual_seed(seed)
    draw = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    m, u, v = draw(side, side), draw(side, rank), draw(side, rank)
    return torch.stack([(m + u @ draw(rank, rank) @ v.T + noise * draw(side, side)).reshape(-1) for _ in range(n)])


def gossip_alone(x0, options, rounds):
    """Consensus error after ``rounds`` rounds relative to the start, and the bits each worker sent."""
    side = math.isqrt(x0.shape[1])
    algo = powergossip(make_topology("ring", x0.shape[0]), x0, options, [x0.shape[1]], [(side, side)])
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
        algo = powergossip(topo, start(n, d), options, SEGMENTS, SHAPES)
        problem = Quadratic(n, d)
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


def test_a_checkpoint_resumes_the_same_trajectory():
    """state_dict holds the round, the seed and every edge's bases: a fresh instance loading it continues exactly."""
    n, d = 8, sum(SEGMENTS)
    topo = make_topology("ring", n)
    problem = Quadratic(n, d)
    cfg = LocalStepConfig(momentum=0.9, nesterov=True)
    a = powergossip(topo, start(n, d, identical=False), {"rank": 2}, SEGMENTS, SHAPES, cfg)
    trajectory(a, problem, steps=5)
    saved = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in a.state_dict().items() if k != "local"}
    saved["local"] = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in a.state_dict()["local"].items()}
    assert saved["edge_bases"].shape == (16, sum((b.rows + b.cols) * b.rank for b in a.blocks))
    rest = trajectory(a, problem, steps=6)
    b = powergossip(topo, start(n, d, seed=7), {"rank": 2}, SEGMENTS, SHAPES, cfg)
    b.load_state_dict(saved)
    torch.testing.assert_close(trajectory(b, problem, steps=6), rest, rtol=0, atol=0)


def test_warm_start_is_an_option_of_bench_run():
    from bench.algorithms import ALGORITHMS
    from bench.run.config import parse_sets, resolve

    cfg = resolve({}, {}, parse_sets(["algorithm=powergossip", "algorithm_options.warm_start=false"]))
    assert cfg.algorithm_options == {"warm_start": False}
    assert parse_options(ALGORITHMS.get("powergossip"), cfg.algorithm_options).warm_start is False
    assert parse_options(ALGORITHMS.get("powergossip"), {}).warm_start is True


def test_the_published_form_refuses_a_time_varying_graph_in_one_line(tmp_path, capsys):
    """one-peer-exp's rounds send one way (i + 2^k receives from i, not back), so an edge has no two ends to step
    its basis; the shared form runs there (a gossip with W_t, doubly stochastic, keeps the average)."""
    from bench.cli import main

    topo = make_topology("one-peer-exp", 8)
    with pytest.raises(BenchError, match="warm_start=false"):
        build("powergossip", topo, start(8, identical=False), "none", {})
    algo = build("powergossip", topo, start(8, identical=False), "none", SHARED)
    mean = algo.x.mean(0)
    for _ in range(6):
        algo.step(None, LR)
    torch.testing.assert_close(algo.x.mean(0), mean, rtol=0, atol=1e-12)
    argv = ["run", "--task", "lsq", "--nodes", "8", "--epochs", "1", "--algorithm", "powergossip", "--compressor",
            "none", "--topology", "one-peer-exp", "--quiet", "--out", str(tmp_path / "r")]
    assert_refused(main(argv), capsys.readouterr().err, "warm_start", "one-peer-exp")
    assert not (tmp_path / "r").exists()


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
