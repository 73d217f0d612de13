"""Boyd et al.'s pairwise gossip, which the suite once mixed with the graph's weights, against a float64 replay.
(The other rules it once had in a form of its own, each against its authors' code: AdaGossip's capped step in
tests/test_adagossip.py, DoCoM's STORM estimator in tests/test_docom.py, the Base-(k+1) rounds in
tests/test_base_graphs.py.)"""
import pytest
import torch

from bench.faults import FaultSchedule, parse_faults
from bench.topology import make_topology
from test_algorithms import build, start


@pytest.mark.parametrize("graph, n", [("ring", 8), ("star", 9)])
def test_pairwise_gossip_is_boyds_exact_average_of_the_rounds_edge(graph, n):
    """Boyd, Ghosh, Prabhakar & Shah (2006): in each round the drawn edge's two workers both take the mean of their
    models, x_i = x_j = (x_i + x_j)/2, everyone else keeps theirs. D-PSGD under faults.pairwise against that
    replay of the schedule's edges, two messages a round and none lost (the average kept:
    tests/test_keeping_the_average.py, dpsgd-pairwise); and the exact average needs fewer rounds to bring the
    spread to 1e-6 of what it was than the same edges mixed with the graph's w_ij (the suite's form before
    2026-12-07)."""
    topo = make_topology(graph, n)
    algo = build("dpsgd", topo, start(n, identical=False), faults={"pairwise": True})
    schedule = FaultSchedule(parse_faults({"pairwise": True}, n), topo.link_union(), 1)
    W = torch.as_tensor(topo.W.copy(), dtype=torch.float64)
    x, y = algo.x.clone(), algo.x.clone()  # Boyd's; the graph's weights
    reached = {"boyd": None, "graph": None}
    spread = float((x - x.mean(0)).norm())
    for t in range(1500):
        traffic = algo.step(None, 0.0)
        assert traffic.link_messages == 2 and traffic.link_lost == 0
        i, j = schedule.pair(t)
        x[[i, j]] = (x[i] + x[j]) / 2
        y[[i, j]] = torch.stack([y[i] + W[i, j] * (y[j] - y[i]), y[j] + W[j, i] * (y[i] - y[j])])
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-12)
        for name, z in (("boyd", x), ("graph", y)):
            if reached[name] is None and float((z - z.mean(0)).norm()) <= 1e-6 * spread:
                reached[name] = t + 1
    assert reached["boyd"] is not None and (reached["graph"] is None or reached["boyd"] < reached["graph"]), reached
