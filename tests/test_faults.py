"""Unreliable networks, the schedule and D-PSGD's rule (bench/faults): losses at the rate asked, bursts of the
length asked, the same losses for any process and any order of asking, outages exactly where they are
said, late messages the share asked of the delivered ones, pairwise gossip one edge a round, and, in float64, that
D-PSGD's reweighting still reaches consensus."""
from __future__ import annotations

import numpy as np
import pytest

from bench.errors import BenchError
from bench.faults import FaultSchedule, parse_faults, reweighted
from bench.topology import make_topology


def schedule(faults: dict, topology: str = "ring", n: int = 8, seed: int = 0) -> tuple[FaultSchedule, object]:
    topo = make_topology(topology, n)
    return FaultSchedule(parse_faults(faults, n), topo.link_union(), seed), topo


def losses(s: FaultSchedule, rounds: int) -> np.ndarray:
    return np.stack([s.lost_union(t) for t in range(rounds)])  # [rounds, E]


def test_bernoulli_losses_come_at_the_rate_asked_and_independently():
    s, _ = schedule({"drop": 0.2}, n=16)
    lost = losses(s, 2000)  # 64,000 messages
    assert lost.mean() == pytest.approx(0.2, abs=0.01)
    follow = lost[1:][lost[:-1]].mean()  # the chance a loss follows a loss: no memory
    assert follow == pytest.approx(0.2, abs=0.02)


def test_gilbert_elliott_keeps_the_mean_rate_and_loses_in_bursts_of_the_length_asked():
    s, _ = schedule({"drop": 0.1, "drop_model": "gilbert-elliott", "burst": 5}, n=16)
    lost = losses(s, 4000)
    assert lost.mean() == pytest.approx(0.1, abs=0.015)
    runs = []
    for column in lost.T:  # lengths of the runs of consecutive losses of each link
        edges = np.flatnonzero(np.diff(np.concatenate([[0], column.astype(int), [0]])))
        runs += list(edges[1::2] - edges[::2])
    assert np.mean(runs) == pytest.approx(5.0, rel=0.1)
    assert lost[1:][lost[:-1]].mean() == pytest.approx(1 - 1 / 5, abs=0.03)  # in a burst, the next is lost too


def test_the_schedule_is_the_same_for_any_order_of_asking_and_any_process():
    faults = {"drop": 0.3, "drop_model": "gilbert-elliott", "burst": 3}
    first, _ = schedule(faults, seed=7)
    forward = losses(first, 60)
    again, _ = schedule(faults, seed=7)
    for t in (59, 3, 40, 3, 0):  # backwards and repeated: the chain replays from round 0
        assert (again.lost_union(t) == forward[t]).all()
    other, _ = schedule(faults, seed=8)
    assert (losses(other, 60) != forward).any()
    # another interpreter computes the same losses (a torch.distributed rank asks the same question): the ranks of
    # tests/test_dist.py lose the simulator's messages


def test_symmetric_losses_take_both_directions_of_an_edge_together():
    s, topo = schedule({"drop": 0.4, "symmetric": True})
    links = topo.link_union()
    back = links.reverse()
    lost = losses(s, 200)
    assert (lost == lost[:, back]).all() and 0.3 < lost.mean() < 0.5
    plain, _ = schedule({"drop": 0.4})
    assert (losses(plain, 200) != losses(plain, 200)[:, back]).any()  # directed: each on its own


def test_an_outage_takes_exactly_its_edge_in_exactly_its_rounds():
    s, topo = schedule({"down": [{"edge": [1, 0], "rounds": [10, 20]}]})
    links = topo.link_union()
    on_edge = np.minimum(links.src, links.dst) * 100 + np.maximum(links.src, links.dst) == 1
    lost = losses(s, 30)
    assert lost[10:20][:, on_edge].all() and not lost[10:20][:, ~on_edge].any()
    assert not lost[:10].any() and not lost[20:].any()


def test_a_time_varying_topology_keeps_each_links_draws_by_its_endpoints():
    s, topo = schedule({"drop": 0.5}, topology="one-peer-exp", n=8)
    assert topo.period > 1
    for t in range(2 * topo.period):
        links = topo.links_at(t)
        ids = links.ids_in(topo.link_union())
        assert (s.delivered(t, links) == ~s.lost_union(t)[ids]).all()


@pytest.mark.parametrize("faults", [{"drop": 0.3, "symmetric": True}, {"active": 0.6}, {"drop": 0.3}])
def test_dpsgd_reweighting_reaches_consensus_whatever_is_lost(faults):
    """x_{t+1} = W'_t x_t in float64 from a random start; W'_t: the ring's W after the round's losses, each receiver
    averaging what arrived (a connected graph with self-weights: consensus). What it keeps of the average, through
    the method: tests/test_keeping_the_average.py."""
    s, topo = schedule(faults)
    x = np.random.default_rng(0).standard_normal((8, 3))
    for t in range(3000):
        links = topo.links_at(t)
        W = reweighted(topo.W_at(t), links, s.delivered(t, links))
        assert np.allclose(W.sum(axis=1), 1.0, atol=1e-14) and (W >= 0).all()
        x = W @ x
    assert np.abs(x - x.mean(axis=0)).max() < 1e-9


def test_a_synchronous_round_waits_for_its_slowest_worker():
    from bench.faults.straggler import round_factor, worker_factors

    fixed = parse_faults({"straggler": {"model": "fixed", "workers": [3], "factor": 4}}, 8).straggler
    assert list(worker_factors(fixed, 8, 0, 5)) == [1, 1, 1, 4, 1, 1, 1, 1] and round_factor(fixed, 8, 0, 5) == 4
    tail = parse_faults({"straggler": {"model": "exponential", "mean": 0.5}}, 8).straggler
    per_worker = np.stack([worker_factors(tail, 8, 1, t) for t in range(4000)])
    assert per_worker.mean() == pytest.approx(1.5, abs=0.02)  # 1 + Exp(mean 0.5)
    rounds = np.array([round_factor(tail, 8, 1, t) for t in range(4000)])
    # the max of 8 exponentials of mean 0.5 has mean 0.5 * H_8 = 1.359: the round pays for the slowest
    assert rounds.mean() == pytest.approx(1 + 0.5 * sum(1 / k for k in range(1, 9)), abs=0.03)
    assert round_factor(tail, 8, 1, 17) == round_factor(tail, 8, 1, 17) and round_factor(None, 8, 1, 17) == 1.0


def test_workers_away_lose_their_links_both_ways_at_the_rate_asked():
    s, topo = schedule({"active": 0.75}, n=16)
    links = topo.link_union()
    away = np.stack([s.away(t) for t in range(1000)])
    assert away.mean() == pytest.approx(0.25, abs=0.01)
    for t in (0, 7, 999):
        expected = away[t][links.src] | away[t][links.dst]
        assert (s.lost_union(t) == expected).all()
    churn, _ = schedule({"absent": [{"worker": 2, "rounds": [5, 9]}]})
    assert [bool(churn.away(t)[2]) for t in range(4, 10)] == [False, True, True, True, True, False]
    assert not churn.away(6)[[0, 1, 3, 4, 5, 6, 7]].any()
    # the activation draws are their own: adding losses keeps who is away
    both, _ = schedule({"active": 0.75, "drop": 0.3}, n=16)
    assert all((both.away(t) == s.away(t)).all() for t in range(50))


def test_late_messages_are_the_asked_share_of_the_delivered_ones_and_never_lost_ones():
    topo = make_topology("ring", 16)
    schedule = FaultSchedule(parse_faults({"drop": 0.2, "late": 0.3, "staleness": 2}, 16), topo.link_union(), 5)
    late = np.stack([schedule.late_union(t) for t in range(2000)])
    lost = np.stack([schedule.lost_union(t) for t in range(2000)])
    assert not (late & lost).any()
    assert abs(late.sum() / (~lost).sum() - 0.3) < 0.01  # 30 % of what is delivered
    again = FaultSchedule(parse_faults({"drop": 0.2, "late": 0.3, "staleness": 2}, 16), topo.link_union(), 5)
    assert np.array_equal(again.late_union(1234), late[1234])  # a pure function of (seed, round, link)


def test_pairwise_gossip_takes_one_edge_a_round_uniformly_and_sends_only_on_it():
    topo = make_topology("ring", 8)
    schedule = FaultSchedule(parse_faults({"pairwise": True}, 8), topo.link_union(), 2)
    union = topo.link_union()
    seen = []
    for t in range(4000):
        i, j = schedule.pair(t)
        assert j in topo.neighbors(i) if hasattr(topo, "neighbors") else abs(i - j) in (1, 7)
        away = schedule.away(t)
        assert away.sum() == 6 and not away[i] and not away[j]
        sent = ~schedule.unsent_union(t)
        assert sorted(zip(union.src[sent].tolist(), union.dst[sent].tolist())) == [(i, j), (j, i)]
        assert not schedule.lost_union(t)[sent].any()
        seen.append((i, j))
    counts = np.unique(np.array(seen), axis=0, return_counts=True)[1]
    assert len(counts) == 8 and counts.min() > 400 and counts.max() < 600  # 500 expected per edge


@pytest.mark.parametrize("faults, message", [
    ({"drop": 1.5}, "faults.drop=1.5: a probability in [0, 1]"),
    ({"drop": -0.1}, "faults.drop=-0.1: a probability in [0, 1]"),
    ({"drop": "often"}, "faults.drop='often': a probability in [0, 1]"),
    ({"drop": True}, "faults.drop=True: a probability in [0, 1]"),
    ({"drop": 0.1, "drop_model": "pareto"}, "faults.drop_model='pareto': one of bernoulli, gilbert-elliott"),
    ({"drop": 0.1, "burst": 3}, "faults.burst=3: goes with drop_model=gilbert-elliott"),
    ({"drop": 0.1, "drop_model": "gilbert-elliott", "burst": 0.5}, "faults.burst=0.5: the mean length"),
    ({"drop": 1.0, "drop_model": "gilbert-elliott"}, "faults.drop=1.0: below 1 under gilbert-elliott"),
    ({"symmetric": "yes"}, "faults.symmetric='yes': true or false"),
    ({"loss": 0.1}, "faults.loss: unknown; the keys are drop, drop_model, burst, symmetric, down"),
    ({"down": [{"edge": [2, 2], "rounds": [0, 5]}]}, "faults.down="),
    ({"down": [{"edge": [0, 9], "rounds": [0, 5]}]}, "i != j are workers 0..7"),
    ({"down": [{"edge": [0, 1], "rounds": [5, 5]}]}, "0 <= start < stop"),
    ({"down": {"edge": [0, 1]}}, "faults.down="),
    (0.1, "faults=0.1: a mapping, e.g. {drop: 0.05}"),
    ({"straggler": {"model": "fixed", "workers": [9], "factor": 2}}, "faults.straggler.workers=[9]"),
    ({"straggler": {"model": "fixed", "workers": [1], "factor": 0.5}}, "faults.straggler.factor=0.5: a slow-down"),
    ({"straggler": {"model": "exponential", "mean": 0}}, "faults.straggler.mean=0: the mean extra share"),
    ({"straggler": {"model": "pareto"}}, "faults.straggler={'model': 'pareto'}: {model: fixed"),
    ({"straggler": {"model": "exponential", "mean": 1, "workers": [1]}}, "faults.straggler="),
    ({"active": 0}, "faults.active=0: the chance that a worker takes part in a round, in (0, 1]"),
    ({"active": 0.1}, "faults.active=0.1: at least 1/n = 0.125"),
    ({"absent": [{"worker": 8, "rounds": [0, 5]}]}, "i is a worker 0..7"),
    ({"absent": [{"worker": 1, "rounds": [5, 2]}]}, "0 <= start < stop"),
    ({"absent": {"worker": 1}}, "faults.absent="),
    ({"late": 1.5}, "faults.late"), ({"late": -0.1}, "faults.late"),
    ({"late": 0.1, "staleness": -1}, "faults.staleness"),
    ({"late": 0.1, "staleness": 1.5}, "faults.staleness"), ({"staleness": 2}, "faults.staleness"),
    ({"late": 0.1, "staleness": 10**20}, "0..1000"),  # ended in a TypeError of the schedule
    ({"pairwise": "yes"}, "faults.pairwise"), ({"pairwise": True, "active": 0.5}, "faults.pairwise"),
])
def test_a_bad_fault_setting_is_one_line_naming_it(faults, message):
    """Every part of a faults setting (losses, outages, stragglers, activation, lateness, pairwise gossip)."""
    with pytest.raises(BenchError) as err:
        parse_faults(faults, 8)
    text = str(err.value)
    assert message in text and "\n" not in text, text
