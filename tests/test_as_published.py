"""Rules the suite once had in a form of its own, each against a float64 reference written from its authors' code
or paper: AdaGossip's capped step (aparna-aketi/AdaG_SGD) and Boyd et al.'s pairwise gossip. (DoCoM's STORM
estimator: tests/test_docom.py; the Base-(k+1) graphs' rounds: tests/test_base_graphs.py.)"""
import pytest
import torch

from bench.algorithms import LocalStepConfig
from bench.algorithms.choco import ADAGOSSIP_GAMMA
from bench.faults import FaultSchedule, parse_faults
from bench.topology import make_topology
from test_algorithms import Quadratic, build, start
from test_faults_late import build as build_faulty


def adagossip_reference(x0, W, grad, steps, lr, gamma, beta=0.999, eps=1e-8, cap=True):
    """Choco-SGD with exact messages (x̂ = x after each exchange) and AdaGossip's step as the authors' code takes
    it (``_query_gossip_queue``): v ← βv + (1 − β)u², step = clamp(γ / (√(v / (1 − βᵗ)) + ε), max = 1), x += step ⊙ u."""
    x, v = x0.clone(), torch.zeros_like(x0)
    for t in range(1, steps + 1):
        if grad is not None:
            x = x - lr * grad(x)
        u = (W - torch.eye(len(W), dtype=x.dtype)) @ x
        v = beta * v + (1 - beta) * u * u
        step = gamma / ((v / (1 - beta ** t)).sqrt() + eps)
        x = x + (step.clamp(max=1.0) if cap else step) * u
    return x


@pytest.mark.parametrize("cap, beta", [(True, 0.999), (True, 0.9), (False, 0.9)])
def test_adagossip_is_the_authors_capped_step_over_three_hundred_steps(cap, beta):
    n, steps, lr, gamma = 6, 300, 0.05, 1.0
    topo = make_topology("ring", n)
    problem, x0 = Quadratic(n, 40), start(n, identical=False)
    algo = build("choco", topo, x0, "none", {"gamma": gamma, "adagossip": True, "ada_beta": beta, "ada_cap": cap},
                 local_cfg=LocalStepConfig(momentum=0.0, weight_decay=0.0))
    for _ in range(steps):
        algo.step(problem.grad(algo.x), lr)
    W = torch.as_tensor(topo.W.copy(), dtype=torch.float64)
    expected = adagossip_reference(x0, W, problem.grad, steps, lr, gamma, beta, cap=cap)
    torch.testing.assert_close(algo.x, expected, rtol=0, atol=1e-10)


def test_adagossip_gossip_reaches_consensus_with_the_cap_and_stalls_without():
    """Gossip alone, ring of 8, sign, γ = 1 (the authors' default, what auto gives): the capped step reaches
    consensus; the uncapped one (the suite's form before) takes steps of γ/ε on coordinates that agree and stalls."""
    assert ADAGOSSIP_GAMMA == 1.0
    x0 = torch.randn(8, 200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    spread = {}
    for cap in (True, False):
        algo = build("choco", make_topology("ring", 8), x0, "sign", {"adagossip": True, "ada_cap": cap})
        for _ in range(1500):
            algo.step(None, 0.0)
        spread[cap] = float(((algo.x - algo.x.mean(0)) ** 2).sum() / 8)
    assert spread[True] < 1e-20 and spread[False] > 1.0, spread


@pytest.mark.parametrize("graph, n", [("ring", 8), ("star", 9)])
def test_pairwise_gossip_is_boyds_exact_average_of_the_rounds_edge(graph, n):
    """Boyd, Ghosh, Prabhakar & Shah (2006): in each round the drawn edge's two workers both take the mean of their
    models, x_i = x_j = (x_i + x_j)/2, everyone else keeps theirs. D-PSGD under faults.pairwise against that
    replay of the schedule's edges; and the exact average needs fewer rounds to bring the spread to 1e-6 of what
    it was than the same edges mixed with the graph's w_ij (the suite's form before 2026-12-07)."""
    topo = make_topology(graph, n)
    algo = build_faulty("dpsgd", topo, {"pairwise": True})
    schedule = FaultSchedule(parse_faults({"pairwise": True}, n), topo.link_union(), 1)
    W = torch.as_tensor(topo.W.copy(), dtype=torch.float64)
    x, y = algo.x.clone(), algo.x.clone()  # Boyd's; the graph's weights
    reached = {"boyd": None, "graph": None}
    spread = float((x - x.mean(0)).norm())
    for t in range(1500):
        algo.step(None, 0.0)
        i, j = schedule.pair(t)
        x[[i, j]] = (x[i] + x[j]) / 2
        y[[i, j]] = torch.stack([y[i] + W[i, j] * (y[j] - y[i]), y[j] + W[j, i] * (y[i] - y[j])])
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-12)
        for name, z in (("boyd", x), ("graph", y)):
            if reached[name] is None and float((z - z.mean(0)).norm()) <= 1e-6 * spread:
                reached[name] = t + 1
    assert reached["boyd"] is not None and (reached["graph"] is None or reached["boyd"] < reached["graph"]), reached
