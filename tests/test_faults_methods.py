"""DeepSqueeze and BEER on a network that loses messages. DeepSqueeze's gossip of c is reweighted (D-PSGD's rule):
in float64 its update is the authors' with the round's reweighted W, the average moves exactly as SGD's under
symmetric losses and with workers away, and one-directional losses move it. BEER keeps h and g per link with
Choco's acknowledgement rule: mean(v) = mean(d) and the average moves as η·mean(v) says whatever is lost, a
schedule that loses nothing is BEER without faults, its gossip still reaches consensus. Both run alike in the
simulator and under torch.distributed processes."""
from __future__ import annotations

import pytest
import torch

from bench.algorithms import LocalStep, LocalStepConfig, make_algorithm
from bench.catalog.algorithms import METHODS
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.faults import FaultSchedule, parse_faults, reweighted
from bench.faults.away import kept_rows, restore_rows
from bench.topology import make_topology
from test_algorithms import Quadratic, start
from dist_faults import assert_dist_loses_as_the_simulation

D, LR = 40, 0.05
BERNOULLI = {"drop": 0.3}
BURSTS = {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 4}


def build(name, topo, faults, compressor="sign", gamma=0.4, x0=None, local=None):
    """``name`` on a simulated ``topo`` that loses messages as ``faults`` says (None: a perfect network)."""
    schedule = FaultSchedule(parse_faults(faults, topo.n), topo.link_union(), 1) if faults is not None else None
    comm = SimulatedCommunicator(topo, faults=schedule)
    return make_algorithm(name, start(topo.n, identical=False) if x0 is None else x0, comm,
                          compressor=make_compressor(compressor, contraction=METHODS.get(name).contraction),
                          local=LocalStep(local or LocalStepConfig()), options={"gamma": gamma},
                          generator=torch.Generator().manual_seed(3))


def recording(algo) -> list[torch.Tensor]:
    """The local step's directions d_t, as the algorithm takes them in (appended to the list returned)."""
    directions, original = [], algo.local.direction

    def record(x, g):
        out = original(x, g)
        directions.append(out.clone())
        return out

    algo.local.direction = record
    return directions


# -- DeepSqueeze: the reweight rule ---------------------------------------------------------------------
@pytest.mark.parametrize("faults", [{**BERNOULLI, "symmetric": True}, {**BURSTS, "symmetric": True}, BERNOULLI])
@pytest.mark.parametrize("compressor", ["sign", "top:0.1"])
def test_deepsqueeze_under_losses_is_the_authors_update_with_the_reweighted_matrix(faults, compressor):
    """x½ = x − η d; v = x½ + e; c = Q(v); e = v − c; x = x½ + γ (W'_t c − c), W'_t: the round's W with each
    lost link's weight on its receiver's diagonal (the error does not depend on what arrived)."""
    n, gamma = 8, 0.3
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    algo = build("deepsqueeze", topo, faults, compressor, gamma)
    twin, schedule = make_compressor(compressor, contraction=METHODS.get("deepsqueeze").contraction), algo.comm.faults
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


@pytest.mark.parametrize("faults", [{**BERNOULLI, "symmetric": True}, {**BURSTS, "symmetric": True},
                                    {"down": [{"edge": [0, 1], "rounds": [0, 100]}]}])
@pytest.mark.parametrize("compressor", ["sign", "top:0.1"])
def test_deepsqueeze_keeps_the_average_moving_as_sgd_under_symmetric_losses(faults, compressor):
    """W'_t symmetric, so doubly stochastic: Σ_i (Σ_j w'_ij c_j − c_i) = 0 and mean(x_{t+1}) = mean(x_t) − η mean(d_t)."""
    n = 8
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    algo = build("deepsqueeze", topo, faults, compressor, local=LocalStepConfig(momentum=0.5, weight_decay=1e-3))
    directions, lost, worst = recording(algo), 0, 0.0
    for _ in range(100):
        before = algo.x.mean(0).clone()
        lost += algo.step(problem.grad(algo.x), LR).link_lost
        worst = max(worst, float((algo.x.mean(0) - (before - LR * directions[-1].mean(0))).abs().max()))
    assert lost > 0 and worst < 1e-12, worst


def test_deepsqueeze_one_directional_losses_move_the_average():
    """Directed losses leave W'_t's columns summing to other than 1: the consensus term no longer sums to zero."""
    n = 8
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    algo = build("deepsqueeze", topo, BERNOULLI)
    directions, drift = recording(algo), torch.zeros(D, dtype=torch.float64)
    for _ in range(100):
        before = algo.x.mean(0).clone()
        algo.step(problem.grad(algo.x), LR)
        drift += algo.x.mean(0) - (before - LR * directions[-1].mean(0))
    assert float(drift.abs().max()) > 1e-3


@pytest.mark.parametrize("faults", [{"active": 0.6}, {"absent": [{"worker": 2, "rounds": [5, 40]}], "drop": 0.2,
                                                      "symmetric": True}])
def test_deepsqueeze_with_workers_away_keeps_the_average_moving_by_the_present_workers_steps(faults):
    """As the runner does it (bench/faults/away.py): an away worker's rows of x, e and the momentum are put back
    after the step. Its links are lost both ways, so the present workers' consensus terms sum to zero among
    themselves and mean(x_{t+1}) = mean(x_t) − (η/n) Σ_{i present} d_i."""
    n = 8
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    algo = build("deepsqueeze", topo, faults, local=LocalStepConfig(momentum=0.5))
    directions, schedule, worst, sat_out = recording(algo), algo.comm.faults, 0.0, 0
    for t in range(60):
        away = torch.as_tensor(schedule.away(t).nonzero()[0])
        present = torch.ones(n, dtype=torch.bool)
        present[away] = False
        before, x_away = algo.x.mean(0).clone(), algo.x[away].clone()
        kept = kept_rows(algo.state_dict(), away, n)
        algo.step(problem.grad(algo.x), LR)
        restore_rows(algo.state_dict(), away, kept, n)
        expected = before - LR * directions[-1][present].sum(0) / n
        worst = max(worst, float((algo.x.mean(0) - expected).abs().max()))
        assert torch.equal(algo.x[away], x_away)
        sat_out += len(away)
    assert sat_out > 0 and worst < 1e-12, worst


# -- BEER: copies per link, the acknowledgement rule ----------------------------------------------------------
@pytest.mark.parametrize("faults", [BERNOULLI, BURSTS, {"drop": 0.2, "symmetric": True},
                                    {"drop": 0.1, "late": 0.3, "staleness": 2}])  # late q's land at both ends
@pytest.mark.parametrize("compressor", ["sign", "top:0.1"])
def test_beer_tracks_the_average_direction_and_its_average_moves_as_sgd_whatever_is_lost(faults, compressor):
    """u_h and u_g sum to zero over the workers whatever the copies (each link adds w_e c_e at its receiver and
    takes it from its sender, both ends holding one copy): mean(v_t) = mean(d_t), mean(x_{t+1}) = mean(x_t) − η mean(v_t)."""
    n = 8
    topo, problem = make_topology("ring", n), Quadratic(n, D)
    algo = build("beer", topo, faults, compressor, local=LocalStepConfig(momentum=0.5, weight_decay=1e-3))
    assert algo.per_link
    directions, lost, worst = recording(algo), 0, 0.0
    for _ in range(100):
        before = algo.x.mean(0).clone()
        lost += algo.step(problem.grad(algo.x), LR).link_lost
        scale = max(1.0, float(algo.v.abs().max()))
        worst = max(worst, float((algo.v.mean(0) - directions[-1].mean(0)).abs().max()) / scale,
                    float((algo.x.mean(0) - (before - LR * algo.v.mean(0))).abs().max()) / scale)
    assert lost > 0 and worst < 1e-12, worst


@pytest.mark.parametrize("compressor", ["sign", "top:0.1"])
def test_a_schedule_that_loses_nothing_is_beer_without_faults(compressor):
    """Every link used every round and nothing lost: a worker's out-link copies agree (an operator without
    randomness), so the per-link sums are (W − I)·copy and the iterates and the bits are the static method's."""
    topo, problem = make_topology("ring", 8), Quadratic(8, D)
    x0, local = start(8, identical=False), LocalStepConfig(momentum=0.9)
    plain = build("beer", topo, None, compressor, x0=x0.clone(), local=local)
    never = build("beer", topo, {"down": [{"edge": [0, 1], "rounds": [10**6, 10**6 + 1]}]}, compressor,
                  x0=x0.clone(), local=local)
    assert never.per_link and not plain.per_link
    for _ in range(30):
        a, b = plain.step(problem.grad(plain.x), LR), never.step(problem.grad(never.x), LR)
        torch.testing.assert_close(never.x, plain.x, rtol=0, atol=1e-12)
        torch.testing.assert_close(never.v, plain.v, rtol=0, atol=1e-12)
    assert a.wire_bits == b.wire_bits and b.link_lost == 0


@pytest.mark.parametrize("faults", [BERNOULLI, BURSTS, {"down": [{"edge": [0, 1], "rounds": [0, 400]}]}])
@pytest.mark.parametrize("compressor, gamma", [("sign", 0.4), ("top:0.1", 0.1)])
def test_beer_gossip_keeps_the_average_whatever_is_lost_and_reaches_consensus(faults, compressor, gamma):
    """grad=None: x ← x + γ u_h, then h's update (Choco-Gossip in the code order), on per-link copies."""
    topo = make_topology("ring", 8)
    algo = build("beer", topo, faults, compressor, gamma)
    mean = algo.x.mean(dim=0).clone()
    start_spread = float((algo.x - mean).norm())
    lost = 0
    for _ in range(2000):
        lost += algo.step(None, 0.0).link_lost
    assert lost > 0
    torch.testing.assert_close(algo.x.mean(dim=0), mean, rtol=0, atol=1e-12)
    assert float((algo.x - algo.x.mean(dim=0)).norm()) < 1e-6 * start_spread


# -- what the catalog lets through ---------------------------------------------------------------------------
def test_deepsqueeze_takes_workers_away_and_beer_is_refused_with_them():
    losses, away = parse_faults({"drop": 0.1}, 8), parse_faults({"active": 0.5}, 8)
    for name in ("beer", "deepsqueeze"):
        METHODS.get(name).check_faults(losses)
    METHODS.get("deepsqueeze").check_faults(away)
    with pytest.raises(BenchError) as err:
        METHODS.get("beer").check_faults(away)
    text = str(err.value)
    assert "algorithm 'beer' cannot sit a worker out yet" in text and "deepsqueeze" in text.split("away: ")[1]
    with pytest.raises(BenchError) as err:
        METHODS.get("dcd").check_faults(losses)
    takes = str(err.value).split("take faults: ")[1].split(", ")
    assert {"beer", "deepsqueeze", "choco", "dpsgd"} <= set(takes) and "dcd" not in takes


# -- both runtimes -------------------------------------------------------------------------------------------
@pytest.mark.slow  # processes
@pytest.mark.parametrize("world", [4, 2])  # one worker a process, and two: a lost link inside a process too
@pytest.mark.parametrize("algorithm, rule", [("deepsqueeze", "reweight"), ("beer", "ack")])
def test_under_losses_torch_distributed_processes_are_the_simulation(tmp_path, world, algorithm, rule):
    info = assert_dist_loses_as_the_simulation(tmp_path, world, algorithm, "sign")
    assert info["faults"]["rule"] == rule
