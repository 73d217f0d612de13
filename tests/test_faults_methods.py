"""DeepSqueeze and BEER on a network that loses messages. DeepSqueeze's gossip of c is reweighted (D-PSGD's rule):
in float64 its update is the authors' with the round's reweighted W. BEER keeps h and g per link with Choco's
acknowledgement rule: a schedule that loses nothing is BEER without faults, and its gossip still reaches consensus
keeping the average. What each method declares lets it through as far as its rule goes; both run alike in the
simulator and under torch.distributed processes. (Where the average goes under losses and with workers away, for every method
with a rule: tests/test_keeping_the_average.py.)"""
from __future__ import annotations

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStep, LocalStepConfig, make_algorithm
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.faults import FaultSchedule, parse_faults, reweighted
from bench.topology import make_topology
from test_algorithms import Quadratic, start
from dist_faults import LOSSES, assert_dist_cases_lose_as_the_simulation

D, LR = 40, 0.05
BERNOULLI = {"drop": 0.3}
BURSTS = {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 4}


def build(name, topo, faults, compressor="sign", gamma=0.4, x0=None, local=None):
    """``name`` on a simulated ``topo`` that loses messages as ``faults`` says (None: a perfect network)."""
    schedule = FaultSchedule(parse_faults(faults, topo.n), topo.link_union(), 1) if faults is not None else None
    comm = SimulatedCommunicator(topo, faults=schedule)
    return make_algorithm(name, start(topo.n, identical=False) if x0 is None else x0, comm,
                          compressor=make_compressor(compressor, contraction=ALGORITHMS.get(name).contraction),
                          local=LocalStep(local or LocalStepConfig()), options={"gamma": gamma},
                          generator=torch.Generator().manual_seed(3))


# -- DeepSqueeze: the reweight rule ---------------------------------------------------------------------
@pytest.mark.parametrize("faults", [{**BERNOULLI, "symmetric": True}, {**BURSTS, "symmetric": True}, BERNOULLI])
@pytest.mark.parametrize("compressor", ["sign", "top:0.1"])
def test_deepsqueeze_under_losses_is_the_authors_update_with_the_reweighted_matrix(faults, compressor):
    """x½ = x − η d; v = x½ + e; c = Q(v); e = v − c; x = x½ + γ (W'_t c − c), W'_t: the round's W with each
    lost link's weight on its receiver's diagonal (the error does not depend on what arrived)."""
    n, gamma = 8, 0.3
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    algo = build("deepsqueeze", topo, faults, compressor, gamma)
    contraction = ALGORITHMS.get("deepsqueeze").contraction
    twin, schedule = make_compressor(compressor, contraction=contraction), algo.comm.faults
    x, e, lost = algo.x.clone(), torch.zeros_like(algo.x), 0
    for t in range(30):
        links = topo.links_at(t)
        W = torch.tensor(reweighted(topo.W_at(t), links, schedule.delivered(t, links)), dtype=torch.float64)
        half = x - LR * problem.grad(x)
        v = half + e
        c = twin.compress(v, torch.Generator()).values  # sign and top-k draw nothing
        e = v - c
        x = half + gamma * (W @ c - c)
        lost += algo.step(problem.grad(algo.x), LR).link_lost
        torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-12)
        torch.testing.assert_close(algo.error, e, rtol=0, atol=1e-12)
    assert lost > 0


# where the average goes under symmetric and one-way losses and with workers away: tests/test_keeping_the_average.py


# -- BEER: copies per link, the acknowledgement rule ----------------------------------------------------------
# mean(v) = mean(d) whatever is lost: tests/test_beer.py; the average: tests/test_keeping_the_average.py
# without losses it is the static method; it keeps the average and reaches consensus whatever is lost:
# tests/test_faults_choco.py (the acknowledgement rule, Choco's and BEER's)


def test_deepsqueeze_takes_workers_away_and_beer_is_refused_with_them():
    losses, away = parse_faults({"drop": 0.1}, 8), parse_faults({"active": 0.5}, 8)
    for name in ("beer", "deepsqueeze"):
        ALGORITHMS.get(name).check_faults(losses)
    ALGORITHMS.get("deepsqueeze").check_faults(away)
    with pytest.raises(BenchError) as err:
        ALGORITHMS.get("beer").check_faults(away)
    text = str(err.value)
    assert "algorithm 'beer' cannot sit a worker out yet" in text and "deepsqueeze" in text.split("away: ")[1]
    with pytest.raises(BenchError) as err:
        ALGORITHMS.get("dcd").check_faults(losses)
    takes = str(err.value).split("take faults: ")[1].split(", ")
    assert {"beer", "deepsqueeze", "choco", "dpsgd"} <= set(takes) and "dcd" not in takes


# -- both runtimes -------------------------------------------------------------------------------------------
# every fault rule under torch.distributed: losses (reweight: D-PSGD, DeepSqueeze; ack: Choco, BEER), late messages
# (D-PSGD's stale copies, Choco's ack), pairwise gossip and workers away; all in one launch of processes per world
# (start-up paid once)
DIST_CASES = {f"{a}-{c}-{kind}": (a, c, losses) for kind, losses, methods in (
    ("lossy", LOSSES, [("dpsgd", "none"), ("choco", "sign"), ("deepsqueeze", "sign"), ("beer", "sign")]),
    ("late", {"drop": 0.1, "late": 0.3, "staleness": 2}, [("dpsgd", "none"), ("choco", "sign")]),
    ("pairwise", {"pairwise": True, "drop": 0.2}, [("dpsgd", "none")]),
    ("away", {"active": 0.6, "drop": 0.1}, [("dpsgd", "none")])) for a, c in methods}


@pytest.mark.slow  # processes
@pytest.mark.parametrize("world", [4, 2])  # one worker a process, and two: a lost link inside a process too
def test_under_faults_torch_distributed_processes_are_the_simulation(tmp_path, world):
    """Each case's metrics in the processes are the simulation's to float rounding, with the same messages lost and
    the same bits, and run.json names the method's rule (pairwise gossip and workers away: at 2 processes)."""
    cases = {k: v for k, v in DIST_CASES.items() if world == 2 or not k.endswith(("pairwise", "away"))}
    infos = assert_dist_cases_lose_as_the_simulation(tmp_path, world, cases)
    for name, (algorithm, _, _) in cases.items():
        assert infos[name]["faults"]["rule"] == ALGORITHMS.get(algorithm).fault_rule, name
    assert infos["dpsgd-none-lossy"]["faults"]["rule"] == "reweight"
    if world == 2:
        assert infos["dpsgd-none-away"]["faults"]["active"] == 0.6
