"""Methods on a network that loses messages, in float64 (DeepSqueeze's update with the round's reweighted W, D-PSGD's
rule: tests/test_deepsqueeze.py). The acknowledgement rule (fault_rule "ack": Choco-SGD, and BEER for its h and g):
copies per link on any graph, a lost message added at neither end, so the average of the models is kept whatever is
lost, the gossip still reaches consensus, and a schedule that loses nothing is the method without faults. Late
messages (faults.late, staleness τ) and pairwise gossip (faults.pairwise): what each method's rule keeps (Choco's
average whatever is late; D-PSGD's consensus from models up to τ rounds old), that a late message is applied exactly
τ rounds on, what is counted, and a run paused with messages on their way. (Under torch.distributed processes:
tests/test_dist.py; where the average goes under losses and with workers away, for every method with a rule:
tests/test_keeping_the_average.py; what a method without a rule is told: tests/test_faults_run.py.)"""
from __future__ import annotations

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStep, LocalStepConfig, make_algorithm
from bench.cli import main
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.faults import FaultSchedule, parse_faults
from bench.topology import make_topology
from test_algorithms import Quadratic, start
from test_dist import BASE

BERNOULLI = {"drop": 0.3}
BURSTS = {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 4}


def build(name, topo, faults, compressor="sign", gamma=0.4, x0=None, local=None):
    """``name`` on a simulated ``topo`` that loses messages as ``faults`` says (None: a perfect network); ``gamma``
    None for a method without it."""
    schedule = FaultSchedule(parse_faults(faults, topo.n), topo.link_union(), 1) if faults is not None else None
    comm = SimulatedCommunicator(topo, faults=schedule)
    return make_algorithm(name, start(topo.n, identical=False) if x0 is None else x0, comm,
                          compressor=make_compressor(compressor, contraction=ALGORITHMS.get(name).contraction),
                          local=LocalStep(local or LocalStepConfig()), options={"gamma": gamma} if gamma else {},
                          generator=torch.Generator().manual_seed(3))


# -- the acknowledgement rule (Choco, BEER) --------------------------------------------------------------------
DOWN = {"down": [{"edge": [0, 1], "rounds": [0, 400]}]}


# each loss pattern once, each operator at least once (γ that converge without losses): the rule is one code path.
# BEER's step with grad=None: x ← x + γ u_h, then h's update (Choco-Gossip in the code order), on per-link copies.
@pytest.mark.parametrize("method, faults, compressor, gamma", [
    ("choco", BERNOULLI, "sign", 0.4),
    ("choco", {"drop": 0.5, "drop_model": "gilbert-elliott", "burst": 4}, "top:0.1", 0.1),
    ("choco", DOWN, "sign", 0.4), ("beer", BERNOULLI, "sign", 0.4), ("beer", BURSTS, "top:0.1", 0.1),
    ("beer", DOWN, "sign", 0.4)],
    ids=["choco-bernoulli", "choco-bursts", "choco-link-down", "beer-bernoulli", "beer-bursts", "beer-link-down"])
def test_acknowledged_gossip_keeps_the_average_whatever_is_lost_and_reaches_consensus(method, faults, compressor,
                                                                                     gamma):
    algo = build(method, make_topology("ring", 8), faults, compressor, gamma)
    mean = algo.x.mean(dim=0).clone()
    start_spread = float((algo.x - mean).norm())
    lost = 0
    for _ in range(2000):  # gossip alone: no gradient
        lost += algo.step(None, 0.0).link_lost
    assert lost > 0
    torch.testing.assert_close(algo.x.mean(dim=0), mean, rtol=0, atol=1e-12)  # each link adds and takes the same
    # without losses these reach 1e-9 (sign: 1e-15) of the first spread by round 2000; with them at most 3e-8
    assert float((algo.x - algo.x.mean(dim=0)).norm()) < 1e-6 * start_spread


# a schedule that loses nothing (every link used every round, nothing lost) is the static method, BEER's tracker
# too: tests/test_time_varying_methods.py (test_where_every_link_is_used_every_round_the_per_link_form_is_...)


# -- what the methods keep ---------------------------------------------------------------------
# the average kept whatever is late (both ends take each q alike): tests/test_keeping_the_average.py
def test_late_messages_make_choco_need_a_smaller_step():
    """A late q is sent again in part (the sender's copy lacks it until it lands), so the copies overshoot when
    both arrive: Choco-Gossip sign at γ = 0.4 reaches consensus on time and with 30 % of messages one round late,
    and diverges with half of them three rounds late; γ = 0.2 converges there, and where late messages and lost ones
    mix. Measured after 1000 rounds: 8e-12, 5e-9, 9e8, 1e-16 and 2e-9 of the first spread."""
    topo = make_topology("ring", 8)

    def spread_after(faults, gamma):
        algo = build("choco", topo, faults, "sign", gamma)
        first = float((algo.x - algo.x.mean(dim=0)).norm())
        for _ in range(1000):
            algo.step(None, 0.0)
        return float((algo.x - algo.x.mean(dim=0)).norm()) / first

    assert spread_after(None, 0.4) < 1e-7 and spread_after({"late": 0.3, "staleness": 1}, 0.4) < 1e-7
    assert not spread_after({"late": 0.5, "staleness": 3}, 0.4) < 1.0  # diverged (inf or nan compare False)
    assert spread_after({"late": 0.5, "staleness": 3}, 0.2) < 1e-7
    assert spread_after({"late": 0.3, "staleness": 2, "drop": 0.2}, 0.2) < 1e-7


def test_a_late_q_is_added_at_both_ends_exactly_staleness_rounds_on():
    """Choco-Gossip with the identity and γ ≈ 0 (x stays): each link's copy against a hand replay of the rule, a q
    of round s that is late landing in round s + 2, lost ones never, and the sender's next q taken against a copy
    that lacks what is on its way (so the copy overshoots when both land)."""
    topo = make_topology("ring", 4)
    algo = build("choco", topo, {"late": 0.5, "staleness": 2, "drop": 0.2}, "none", 1e-300)
    schedule, union = algo.comm.faults, algo.comm.union_links().links
    x, src = algo.x.clone(), torch.as_tensor(union.src.copy())  # x + 1e-300·u is x in float64
    copy, on_way = torch.zeros_like(algo.x_hat), {}
    overshoot = False
    for t in range(16):
        copy += on_way.pop(t, torch.zeros_like(copy))
        q = x[src] - copy
        late = torch.as_tensor(schedule.late_union(t).copy()).unsqueeze(1)
        lost = torch.as_tensor(schedule.lost_union(t).copy()).unsqueeze(1)
        on_way[t + 2] = torch.where(late, q, 0.0)
        copy += torch.where(late | lost, 0.0, q)
        algo.step(None, 0.0)
        torch.testing.assert_close(algo.x_hat, copy, rtol=0, atol=1e-12)
        overshoot |= bool(((copy - x[src]).abs() > 1e-9).any())
    assert overshoot  # some copy went past x_src: a late q landed on top of its re-send


def test_dpsgd_with_late_messages_mixes_the_newest_copy_heard_and_reaches_consensus():
    topo = make_topology("ring", 8)
    algo = build("dpsgd", topo, {"late": 0.4, "staleness": 3}, "none", None)
    assert algo.stale
    spread = float((algo.x - algo.x.mean(dim=0)).norm())
    for _ in range(600):
        algo.step(None, 0.0)
    assert float((algo.x - algo.x.mean(dim=0)).norm()) < 1e-8 * spread


def test_dpsgd_stale_rule_on_time_is_dpsgd():
    """late = 1e-300: the stale rule's machinery, every message on time: D-PSGD's iterates exactly."""
    topo, problem = make_topology("ring", 8), Quadratic(8, 40)
    x0 = start(8, identical=False)
    plain = build("dpsgd", topo, None, "none", None, x0=x0.clone())
    stale = build("dpsgd", topo, {"late": 1e-300}, "none", None, x0=x0.clone())
    assert stale.stale
    for _ in range(20):
        plain.step(problem.grad(plain.x), 0.05)
        traffic = stale.step(problem.grad(stale.x), 0.05)
        torch.testing.assert_close(stale.x, plain.x, rtol=0, atol=1e-12)
    assert traffic.link_late == 0


def test_dpsgd_stale_rule_uses_the_model_of_the_round_a_late_message_was_sent():
    """One worker's out-link late every round with staleness 2: its neighbour mixes its model of 2 rounds ago."""
    topo = make_topology("ring", 4)
    x0 = torch.arange(4.0, dtype=torch.float64).reshape(4, 1).repeat(1, 3)
    algo = build("dpsgd", topo, {"late": 1.0, "staleness": 2}, "none", None, x0=x0)
    history = [algo.x.clone()]
    for _ in range(6):
        algo.step(None, 0.0)
        history.append(algo.x.clone())
    W = torch.tensor(topo.W, dtype=torch.float64)
    # every message late by 2: rounds 0, 1 hear nothing (weights on self); from round 2 on x_j of round t − 2
    for t in range(6):
        heard = history[t - 2] if t >= 2 else None
        expect = history[t].clone() if heard is None else \
            torch.diag(W).unsqueeze(1) * history[t] + (W - torch.diag(torch.diag(W))) @ heard
        torch.testing.assert_close(history[t + 1], expect, rtol=0, atol=1e-12)


# a method without the rule for late messages or pairwise gossip is refused: tests/test_faults_run.py
# late messages and pairwise gossip under torch.distributed: tests/test_dist.py (one launch)


def test_late_messages_to_workers_away_still_land_and_a_run_counts_them(tmp_path):
    """D-PSGD's per-link copies are link state, not a worker's: a runner that sits workers out (pairwise gossip)
    restores their rows of x and momentum but leaves the copies heard and the messages on their way, so a late
    message sent before its receiver left lands all the same; the run replays exactly, and counts the late
    messages (their share of those sent) and the workers away (all but a pair each step)."""
    import pandas as pd

    args = [*BASE, "--algorithm", "dpsgd", "--set", "faults.pairwise=true", "--set", "faults.late=0.5",
            "--set", "faults.staleness=3"]
    assert main(["run", *args, "--out", str(tmp_path / "a")]) == 0
    assert main(["run", *args, "--out", str(tmp_path / "b")]) == 0
    a, b = pd.read_parquet(tmp_path / "a" / "metrics.parquet"), pd.read_parquet(tmp_path / "b" / "metrics.parquet")
    steps = a["step"].iloc[-1]
    assert a["workers_absent"].iloc[-1] == 2 * steps and a["messages_sent"].iloc[-1] == 2 * steps
    assert 0.3 < a["messages_late"].iloc[-1] / a["messages_sent"].iloc[-1] < 0.7 and a["messages_dropped"].iloc[-1] == 0
    pd.testing.assert_series_equal(a["test_loss"], b["test_loss"])
    pd.testing.assert_series_equal(a["consensus_distance"], b["consensus_distance"])


@pytest.mark.parametrize("algorithm, compressor", [("dpsgd", "none"), ("choco", "sign"), ("beer", "sign")])
def test_a_paused_run_with_messages_on_their_way_continues_as_if_never_stopped(tmp_path, algorithm, compressor):
    """The delay lines (messages sent but not landed) and the copies heard are checkpointed: a run paused half way
    and continued gives the uninterrupted run's metrics exactly."""
    from test_run import WALL, metrics

    args = [*BASE, "--algorithm", algorithm, "--compressor", compressor, "--set", "faults.late=0.4",
            "--set", "faults.staleness=3", "--set", "faults.drop=0.1", "--set", "compute_time=0.01"]
    assert main(["run", *args, "--out", str(tmp_path / "whole")]) == 0
    assert main(["run", *args, "--set", "stop_at=0.5", "--out", str(tmp_path / "parts")]) == 0
    assert main(["run", *args, "--out", str(tmp_path / "parts")]) == 0
    whole, parts = metrics(tmp_path / "whole"), metrics(tmp_path / "parts")
    assert whole["messages_late"].iloc[-1] > 0
    assert whole.drop(columns=WALL).equals(parts.drop(columns=WALL))
