"""DeepSqueeze (the authors' form, epfml/ChocoSGD): its update written out by hand, on a perfect network and on one
that loses messages, where its gossip of c is reweighted (D-PSGD's rule): the authors' update with the round's
reweighted W. D-PSGD with exact messages, one message a round, gossip alone bringing the models together and the
average (under losses and with workers away too): tests/test_laws.py and tests/test_keeping_the_average.py."""
import pytest
import torch

from bench.faults import reweighted
from bench.topology import make_topology
from test_algorithms import LR, assert_agrees, written_out

LOSSES = {"perfect": None, "one way": {"drop": 0.3}, "both ways": {"drop": 0.3, "symmetric": True},
          "bursts": {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 4, "symmetric": True}}


@pytest.mark.parametrize("faults", LOSSES.values(), ids=LOSSES)
@pytest.mark.parametrize("compressor", ["sign", "top:0.2", "rand:0.2", "qsgd:4"])
def test_the_update_is_the_authors_written_out(compressor, faults):
    """x½ = x − η d; v = x½ + e; c = Q(v); e = v − c; x = x½ + γ (W'_t c − c), W'_t: the round's W with each lost
    link's weight on its receiver's diagonal (the error does not depend on what arrived)."""
    gamma = 0.3
    algo, problem, x, _, Q = written_out("deepsqueeze", compressor, {"gamma": gamma}, n=8, d=12, faults=faults)
    topo, schedule, e, lost = make_topology("ring", 8), algo.comm.faults, torch.zeros_like(x), 0
    for t in range(30):
        links = topo.links_at(t)
        W = topo.W_at(t) if faults is None else reweighted(topo.W_at(t), links, schedule.delivered(t, links))
        half = x - LR * problem.grad(x)
        v = half + e
        c = Q(v)
        e = v - c
        x = half + gamma * (torch.tensor(W) @ c - c)
        lost += algo.step(problem.grad(algo.x), LR).link_lost
        assert_agrees(algo, x=x, error=e)
    assert algo.error.abs().sum() > 0 and (lost > 0) == (faults is not None)
