"""AD-PSGD: the event model's waves (distinct workers, each worker's times the running sum of its factors, the
same schedule however it is asked), the maths of a wave in float64 (a wave moves the average by its directions
only, the gradient is taken at the snapshot, an averaging missing a message is skipped), and runs through the
command line: counted messages and modelled time, resume. Gossip alone reaching consensus and what it refuses:
tests/test_laws.py."""
from __future__ import annotations

import json
from unittest import mock

import numpy as np
import pytest
import torch

from bench.algorithms import LocalStepConfig, make_algorithm
from bench.cli import main
from bench.comm import Communicator, make_network
from bench.errors import BenchError
from bench.faults.events import Waves
from bench.faults.spec import parse_faults
from bench.faults.straggler import worker_factors
from bench.topology import make_topology
from test_algorithms import build as build_with
from test_run import WALL, metrics

EXPONENTIAL = {"straggler": {"model": "exponential", "mean": 0.5}}
SLOW3 = {"straggler": {"model": "fixed", "workers": [3], "factor": 4}}


def waves(faults, n=8, seed=5, topology="ring"):
    topo = make_topology(topology, n)
    return Waves(parse_faults(faults, n).straggler, [topo.neighbors(i) for i in range(n)], seed)


def build(x0, faults=None, seed=5, local=None, network=None, lossy=False):
    """AD-PSGD on a ring with the straggler model ``faults`` (its waves drawn with ``seed``); ``lossy``: the
    network loses messages as ``faults`` says."""
    return build_with("adpsgd", make_topology("ring", x0.shape[0]), x0, options={"faults": parse_faults(
        faults, x0.shape[0]), "seed": seed}, local_cfg=local or LocalStepConfig(), faults=faults if lossy else None,
                      network=network)


def start(n=8, d=12, seed=0):
    return torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# ---- the event model ------------------------------------------------------------------------------------------
def test_waves_hold_distinct_workers_in_time_order_at_the_running_sums_of_their_factors():
    n, seed, count = 8, 5, 80
    schedule = waves(EXPONENTIAL, n, seed)
    straggler = parse_faults(EXPONENTIAL).straggler
    topo = make_topology("ring", n)
    times = {i: [] for i in range(n)}
    last, previous = -np.inf, None
    for w in range(count):
        wave = schedule.wave(w)
        assert len(set(wave.workers.tolist())) == len(wave.workers) >= 1
        assert np.all(np.diff(wave.times) >= 0) and wave.times[0] >= last
        assert wave.advance == pytest.approx(wave.end - (previous.end if previous else 0.0), abs=1e-12)
        if previous is not None:  # maximal: it starts with a worker the previous wave already had
            assert wave.workers[0] in previous.workers
        for i, j, t in zip(wave.workers, wave.peers, wave.times):
            assert j in topo.neighbors(int(i))
            times[int(i)].append(t)
        last, previous = wave.end, wave
    for i, got in times.items():
        factors = [worker_factors(straggler, n, seed, k)[i] for k in range(len(got))]
        np.testing.assert_allclose(got, np.cumsum(factors), rtol=1e-12)
    assert min(len(t) for t in times.values()) < max(len(t) for t in times.values()) <= count  # some wait


def test_without_stragglers_every_wave_is_all_workers_and_a_fixed_slow_one_is_in_every_fourth():
    plain = waves(None, 8)
    for w in range(12):
        wave = plain.wave(w)
        assert wave.workers.tolist() == list(range(8)) and set(wave.times) == {w + 1.0} and wave.advance == 1
    slow = waves(SLOW3, 8)
    for w in range(20):
        wave = slow.wave(w)
        assert (3 in wave.workers) == (w % 4 == 3) and wave.advance == 1 and set(wave.times) == {w + 1.0}
        assert len(wave.workers) == (8 if w % 4 == 3 else 7)


def test_the_schedule_replays_for_a_second_instance_and_any_order_of_asking():
    def key(wave):
        return wave.workers.tolist(), wave.peers.tolist(), wave.times.tolist(), wave.advance

    a, b = waves(EXPONENTIAL), waves(EXPONENTIAL)
    in_order = [key(a.wave(w)) for w in range(40)]
    for w in (30, 5, 31, 0, 39, 39, 12):
        assert key(b.wave(w)) == in_order[w]
    assert [key(waves(EXPONENTIAL).wave(w)) for w in range(40)] == in_order
    other = waves(EXPONENTIAL, seed=6)
    assert [key(other.wave(w)) for w in range(40)] != in_order


# ---- the maths of a wave --------------------------------------------------------------------------------------
def test_a_wave_moves_the_average_by_its_own_directions_and_leaves_the_momentum_of_the_others():
    n, lr = 8, 0.05
    algo = build(start(n), EXPONENTIAL, local=LocalStepConfig(momentum=0.9, nesterov=True, weight_decay=1e-2))
    local, target, directions = algo.local, start(n, seed=9), []
    original = local.direction
    local.direction = lambda x, g: directions.append(original(x, g).clone()) or directions[-1]
    partial = 0
    for w in range(40):
        wave = algo.events.wave(w)
        before = algo.x.mean(0)
        momentum = None if local.momentum_buffer is None else local.momentum_buffer.clone()
        grad = algo.gradient_point() - target  # ½‖x − c_i‖² at the snapshots
        algo.step(grad, lr)
        expected = before - lr / n * directions[-1][torch.as_tensor(wave.workers)].sum(0)
        torch.testing.assert_close(algo.x.mean(0), expected, rtol=0, atol=1e-12)
        idle = torch.as_tensor(np.setdiff1d(np.arange(n), wave.workers))
        if idle.numel():
            partial += 1
            kept = torch.zeros_like(local.momentum_buffer[idle]) if momentum is None else momentum[idle]
            torch.testing.assert_close(local.momentum_buffer[idle], kept, rtol=0, atol=0)
    assert partial > 10


def test_the_gradient_is_taken_at_the_snapshot_not_after_a_later_neighbours_averaging():
    n, lr = 8, 0.1
    schedule = waves(None, n)
    # a wave in which some worker i is picked by a neighbour whose event comes after i's own
    w, i = next((w, int(i)) for w in range(50) for pos, i in enumerate(schedule.wave(w).workers)
                if i in schedule.wave(w).peers[pos + 1:])
    algo = build(start(n), None)
    g = torch.Generator().manual_seed(1)
    for _ in range(w):
        algo.step(torch.randn(n, 12, dtype=torch.float64, generator=g), lr)
    grad = torch.randn(n, 12, dtype=torch.float64, generator=g)
    x, before_snapshot = algo.x.clone(), algo.gradient_point().clone()
    reference = {}
    wave = schedule.wave(w)
    for a, b in zip(wave.workers.tolist(), wave.peers.tolist()):  # the events by hand
        x[a] = x[b] = (x[a] + x[b]) / 2
        x[a] -= lr * grad[a]
        reference[a] = x[a].clone()
    algo.step(grad, lr)
    torch.testing.assert_close(algo.x, x, rtol=0, atol=1e-12)
    for a, row in reference.items():
        torch.testing.assert_close(algo.gradient_point()[a], row, rtol=0, atol=1e-12)
    assert not torch.allclose(algo.gradient_point()[i], algo.x[i])  # averaged into after its own event
    idle = [a for a in range(n) if a not in reference]
    torch.testing.assert_close(algo.gradient_point()[idle], before_snapshot[idle], rtol=0, atol=0)


def test_a_wave_counts_two_messages_per_averaging_and_one_message_time_on_a_link():
    n, d = 8, 12
    net = make_network("p2p-100m")
    algo = build(start(n, d), SLOW3, network=net)
    traffic = algo.step(None, 0.0)  # wave 0: the 7 workers but 3
    wave = algo.events.wave(0)
    sent = np.bincount(np.r_[wave.workers, wave.peers], minlength=n) * 32 * d
    assert traffic.worker_bits.tolist() == sent.tolist() and traffic.link_messages == 14 and traffic.messages == 7
    assert traffic.paper_bits == pytest.approx(2 * 7 * 32 * d / n) == traffic.wire_bits
    assert traffic.comm_time_s == pytest.approx(net.latency_s + 32 * d / net.bandwidth_bps)
    assert algo.compute_units() == 1.0 and algo.waves == 1


def test_it_refuses_a_communicator_other_than_the_simulator():
    with pytest.raises(BenchError, match="simulator only"):
        make_algorithm("adpsgd", start(4), mock.Mock(spec=Communicator))


# ---- runs -------------------------------------------------------------------------------------------------------
RUN = ["run", "--task", "mnist1d-mlp", "--algorithm", "adpsgd", "--compressor", "none", "--topology", "ring",
       "--nodes", "4", "--epochs", "1", "--seed", "3", "--set", "compute_time=0.01",
       "--set", "task_options.n_train=800", "--set", "task_options.n_test=200", "--set", "eval_every=0.5", "--quiet"]


@pytest.mark.parametrize("losses", [{"drop": 0.3}, {"drop": 0.4, "drop_model": "gilbert-elliott", "burst": 4},
                                    {"down": [{"edge": [0, 1], "rounds": [0, 10**6]}]}])
def test_under_losses_an_averaging_missing_a_message_is_skipped_at_both_ends(losses):
    """The ack rule: an averaging happens only when both of its messages arrive in the wave, and then exactly; the
    gossip still reaches consensus (the average kept: tests/test_keeping_the_average.py)."""
    n = 8
    algo = build(start(n), {**losses, **EXPONENTIAL}, lossy=True)
    schedule, union = algo.comm.faults, make_topology("ring", n).link_union()
    link = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(union.src, union.dst))}
    spread0 = float(((algo.x - algo.x.mean(0)) ** 2).sum())
    dropped = skipped = 0
    for w in range(600):
        before = algo.x.clone()
        wave, lost = algo.events.wave(w), schedule.lost_union(w)
        traffic = algo.step(None, 0.0)
        expect = before.clone()  # a hand replay of the wave: averaging only where both directions arrived
        for i, j in zip(wave.workers.tolist(), wave.peers.tolist()):
            if lost[link[(i, j)]] or lost[link[(j, i)]]:
                skipped += 1
                continue
            expect[i] = expect[j] = (expect[i] + expect[j]) / 2
        torch.testing.assert_close(algo.x, expect, rtol=0, atol=1e-12)
        dropped += traffic.link_lost
    assert dropped > 0 and skipped > 0
    assert float(((algo.x - algo.x.mean(0)) ** 2).sum()) < 1e-12 * spread0


def test_a_run_with_stragglers_counts_its_events_and_their_clock_and_continues_as_if_never_stopped(tmp_path):
    slow = ["--set", "faults.straggler={model: exponential, mean: 0.5}"]
    assert main([*RUN, *slow, "--out", str(tmp_path / "whole")]) == 0
    df, record = metrics(tmp_path / "whole"), json.loads((tmp_path / "whole" / "run.json").read_text())
    assert record["status"] == "completed" and record["algorithm"]["label"] == "AD-PSGD"
    steps, d = int(df["step"].iloc[-1]), record["task"]["n_params"]
    schedule = waves(EXPONENTIAL, 4, seed=3)
    events = sum(len(schedule.wave(w).workers) for w in range(steps))
    assert events < 4 * steps
    last = df.iloc[-1]
    assert last["messages_sent"] == 2 * events
    assert last["time_compute_s"] == pytest.approx(0.01 * schedule.wave(steps - 1).end, rel=1e-12)
    assert last["bits_per_worker"] == pytest.approx(2 * events * 32 * d / 4)
    net = make_network()
    assert last["time_comm_s"] == pytest.approx(steps * (net.latency_s + 32 * d / net.bandwidth_bps))
    assert main([*RUN, *slow, "--set", "stop_at=0.5", "--out", str(tmp_path / "parts")]) == 0
    assert json.loads((tmp_path / "parts" / "run.json").read_text())["status"] == "paused"
    assert main([*RUN, *slow, "--out", str(tmp_path / "parts")]) == 0
    assert df.drop(columns=WALL).equals(metrics(tmp_path / "parts").drop(columns=WALL))

