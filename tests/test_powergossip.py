"""PowerGossip with shared randomness and no warm start (the configuration the broadcast gossip seam can
express): the per-edge update of the authors' code written out, the special case it reduces to, where the
average goes, the traffic of its low-rank messages, and the distributed runtime."""

import pytest
import torch

from bench.algorithms import LocalStep, LocalStepConfig, make_algorithm
from bench.comm import SimulatedCommunicator
from bench.errors import BenchError
from bench.topology import make_topology
from test_algorithms import LR, STEPS, TOPOLOGIES, Quadratic, build, start, trajectory

D = 40
# a 3×4 matrix, a bias, a 4×5 matrix, a 1×3 row: two layers compressed by rank, one exact
SEGMENTS = [12, 5, 20, 3]
SHAPES = [(3, 4), (5,), (4, 5), (1, 3)]


def powergossip(topo, x0, options=None, segments=None, shapes=None, local_cfg=None):
    return make_algorithm("powergossip", x0, SimulatedCommunicator(topo), local=LocalStep(local_cfg),
                          options=options, generator=torch.Generator().manual_seed(3), segments=segments,
                          shapes=shapes)


@pytest.mark.parametrize("spec,n", TOPOLOGIES)
def test_full_rank_and_gamma_one_is_dpsgd_gossip_then_step(spec, n):
    """A flat vector of 40 is a zero-padded 7×7 matrix; with rank 7 every P is square and orthogonal, P Pᵀ = I, so
    a round is x ← W x − η d, D-PSGD in its paper order."""
    topo = make_topology(spec, n)
    problem, x0 = Quadratic(n, D), start(n, identical=False)
    ours = trajectory(build("powergossip", topo, x0, "none", {"rank": 7, "gamma": 1.0}), problem)
    dpsgd = trajectory(build("dpsgd", topo, x0, options={"order": "paper"}), problem)
    torch.testing.assert_close(ours, dpsgd, rtol=0, atol=1e-10)


@pytest.mark.parametrize("rank,gamma", [(1, 1.0), (2, 0.6), (3, 1.0)])
@pytest.mark.parametrize("gradient", [True, False])
def test_the_update_is_the_authors_per_edge_update_with_a_shared_projection(rank, gamma, gradient):
    """The authors' PowerGossip.step written over the edges, with every edge's P the round's shared one: on odd
    rounds each edge (i, j), i > j, forms q = (X_i − X_j) P and X_i −= γ w_ij q Pᵀ, X_j += γ w_ij q Pᵀ; on even
    rounds the same with Pᵀ (X_i − X_j) on the left; 1-D tensors by exact gossip; then the SGD step."""
    n = 6
    topo = make_topology("ring", n)
    W = torch.tensor(topo.W, dtype=torch.float64)
    d = sum(SEGMENTS)
    problem, x0 = Quadratic(n, d), start(n, d, identical=False)
    algo = powergossip(topo, x0, {"rank": rank, "gamma": gamma}, SEGMENTS, SHAPES, LocalStepConfig())
    assert [(b.rows, b.cols, b.rank) for b in algo.blocks] == [(3, 4, min(rank, 3)), (4, 5, min(rank, 4)),
                                                               (1, 3, 1)]
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


def test_each_round_moves_every_model_inside_the_rounds_shared_subspace():
    """Rank 1, a flat vector of 49 (a 7×7 matrix), no gradient: on an even (left) round every model's change is
    P·(row), on an odd (right) round (column)·Pᵀ — rank one, along the same P for all workers."""
    n = 8
    algo = build("powergossip", make_topology("ring", n), start(n, 49, identical=False), "none", {"rank": 1})
    for _ in range(4):
        (p,) = algo.bases(algo.t)
        right = algo.t % 2 == 1
        before = algo.x.clone()
        algo.step(None, LR)
        change = (algo.x - before).view(n, 7, 7)
        projected = change @ p @ p.T if right else p @ p.T @ change
        torch.testing.assert_close(projected, change, rtol=0, atol=1e-12)
        assert all(int(torch.linalg.matrix_rank(c)) <= 1 for c in change)


@pytest.mark.parametrize("options", [{"rank": 1}, {"rank": 2, "gamma": 0.5}])
@pytest.mark.parametrize("layers", [False, True])
@pytest.mark.parametrize("gradient", [True, False])
def test_the_average_moves_as_sgd(options, layers, gradient):
    """Every worker applies the same linear map to its differences and W is doubly stochastic, so
    mean(x_{t+1}) = mean(x_t) − η mean(d_t) (no gradient: the average never moves)."""
    n = 9
    topo = make_topology("torus", n)
    d = sum(SEGMENTS) if layers else D
    problem, x0 = Quadratic(n, d), start(n, d, identical=False)
    algo = powergossip(topo, x0, options, SEGMENTS if layers else None, SHAPES if layers else None,
                       LocalStepConfig(momentum=0.5, weight_decay=1e-3))
    directions = []
    original = algo.local.direction

    def recording(x, g):
        out = original(x, g)
        directions.append(out.clone())
        return out

    algo.local.direction = recording
    for _ in range(STEPS):
        before = algo.x.mean(0)
        algo.step(problem.grad(algo.x) if gradient else None, LR)
        expected = before - LR * directions[-1].mean(0) if gradient else before
        torch.testing.assert_close(algo.x.mean(0), expected, rtol=0, atol=1e-12)


def test_rank_one_gossip_alone_reaches_consensus():
    n = 8
    algo = build("powergossip", make_topology("ring", n), start(n, identical=False), "none", {"rank": 1})
    mean = algo.x.mean(0)
    spread = float((algo.x - mean).norm())
    for _ in range(600):
        algo.step(None, LR)
    torch.testing.assert_close(algo.x.mean(0), mean, rtol=0, atol=1e-12)
    assert float((algo.x - mean).norm()) < 1e-3 * spread


@pytest.mark.parametrize("rank", [1, 2])
def test_traffic_is_the_low_rank_message_in_wire_and_paper_bits(rank):
    """One float32 message a round: the exact layers plus r·rows (odd rounds) or r·cols (even rounds) per layer."""
    n = 8
    topo = make_topology("ring", n)
    d = sum(SEGMENTS)
    algo = powergossip(topo, start(n, d), {"rank": rank}, SEGMENTS, SHAPES)
    problem = Quadratic(n, d)
    for t in range(4):
        traffic = algo.step(problem.grad(algo.x), LR)
        floats = 5 + sum(b.rank * (b.rows if t % 2 == 1 else b.cols) for b in algo.blocks)
        assert traffic.messages == 1 and traffic.wire_bits == 32 * floats and traffic.paper_bits == 32 * floats
        assert traffic.comm_time_s > 0


def test_it_compresses_by_itself_and_checks_its_options():
    topo = make_topology("ring", 4)
    with pytest.raises(BenchError, match="own scheme"):
        build("powergossip", topo, start(4), "sign", {})
    for bad in ({"rank": 0}, {"rank": 1.5}, {"rank": True}, {"gamma": 0.0}, {"gamma": 2.0}, {"rnak": 2}):
        with pytest.raises(BenchError, match="rank|gamma|rnak"):
            build("powergossip", topo, start(4), "none", bad)
