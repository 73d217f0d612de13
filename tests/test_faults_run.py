"""Runs on an unreliable network (the `faults` setting): D-PSGD trains with the losses of its schedule, the
metrics count every message sent and every one lost, exactly as the schedule says, the same seed replays the
same run, and what cannot take faults yet is refused in one line before anything is written. (The same under
torch.distributed processes: tests/test_dist.py.)"""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench.cli import main
from bench.faults import FaultSchedule, parse_faults
from bench.topology import make_topology
from test_run import WALL, metrics

RUN = ["--task", "mnist1d-mlp", "--algorithm", "dpsgd", "--compressor", "none", "--topology", "ring", "--nodes", "4",
       "--epochs", "1", "--seed", "3", "--set", "compute_time=0.01", "--set", "task_options.n_train=800",
       "--set", "task_options.n_test=200", "--set", "eval_every=0.5", "--quiet"]
FAULTS = ["--set", "faults.drop=0.3", "--set", "faults.drop_model=gilbert-elliott", "--set", "faults.burst=3"]


@pytest.fixture(scope="module")
def perfect(tmp_path_factory):
    """RUN on a perfect network, once: what each faulty run is compared with."""
    out = tmp_path_factory.mktemp("plain")
    assert main(["run", *RUN, "--out", str(out)]) == 0
    return out


def test_a_lossy_run_counts_what_its_schedule_loses_and_replays_exactly(tmp_path, perfect):
    assert main(["run", *RUN, *FAULTS, "--out", str(tmp_path / "a")]) == 0
    df = metrics(tmp_path / "a")
    steps = int(df["step"].iloc[-1])
    topo = make_topology("ring", 4)
    schedule = FaultSchedule(parse_faults({"drop": 0.3, "drop_model": "gilbert-elliott", "burst": 3}, 4),
                             topo.link_union(), 3)
    lost = sum(int((~schedule.delivered(t, topo.links_at(t))).sum()) for t in range(steps))
    assert df["messages_sent"].iloc[-1] == steps * topo.links_at(0).E  # one gossip a step, every link
    assert df["messages_dropped"].iloc[-1] == lost > 0
    assert df["messages_dropped"].is_monotonic_increasing and df["messages_dropped"].iloc[0] == 0
    record = json.loads((tmp_path / "a" / "run.json").read_text())
    assert record["faults"] == {"drop": 0.3, "drop_model": "gilbert-elliott", "burst": 3.0, "symmetric": False,
                                "seed": 3, "rule": "reweight"}
    assert record["final"]["messages_dropped"] == lost
    # the same seed, the same losses, the same run
    assert main(["run", *RUN, *FAULTS, "--out", str(tmp_path / "b")]) == 0
    again = metrics(tmp_path / "b")
    assert df.drop(columns=WALL).equals(again.drop(columns=WALL))
    # a perfect network trains otherwise, and loses nothing
    assert "faults" not in json.loads((perfect / "run.json").read_text())
    plain = metrics(perfect)
    assert plain["messages_dropped"].iloc[-1] == 0 and plain["messages_sent"].iloc[-1] == df["messages_sent"].iloc[-1]
    assert not np.allclose(plain["consensus_distance"].iloc[1:], df["consensus_distance"].iloc[1:])
    assert plain["bits_per_worker"].iloc[-1] == df["bits_per_worker"].iloc[-1]  # lost messages were sent all the same


def test_a_straggler_stretches_the_modelled_compute_time_and_nothing_else(tmp_path, perfect):
    slow = ["--set", "faults.straggler={model: fixed, workers: [2], factor: 3}"]
    assert main(["run", *RUN, *slow, "--out", str(tmp_path / "slow")]) == 0
    plain, slowed = metrics(perfect), metrics(tmp_path / "slow")
    assert list(slowed["time_compute_s"]) == pytest.approx(list(3 * plain["time_compute_s"]))
    same = [c for c in plain.columns if c not in ("time_compute_s", "time_s", *WALL)]
    assert plain[same].equals(slowed[same])  # the maths is untouched: the round only takes longer
    record = json.loads((tmp_path / "slow" / "run.json").read_text())
    assert record["faults"]["straggler"] == {"model": "fixed", "workers": [2], "factor": 3.0}
    # any method takes stragglers: they change time, not what a message carries
    assert main(["run", *RUN, "--algorithm", "choco", "--compressor", "sign", *slow, "--out", str(tmp_path / "c")]) == 0


def test_a_worker_away_for_the_whole_run_keeps_its_first_model_and_sends_nothing(tmp_path, perfect):
    away = ["--set", "faults.absent=[{worker: 1, rounds: [0, 1000000]}]"]
    assert main(["run", *RUN, *away, "--out", str(tmp_path / "away")]) == 0
    first = json.loads((perfect / "run.json").read_text())["final_local"]
    df, plain = metrics(tmp_path / "away"), metrics(perfect)
    record = json.loads((tmp_path / "away" / "run.json").read_text())
    steps, E = int(df["step"].iloc[-1]), make_topology("ring", 4).links_at(0).E
    # worker 1 neither stepped nor mixed: its own model is the first one, scored as at step 0
    assert record["final_local"]["test_acc"][1] == pytest.approx(df["local_test_acc_mean"].iloc[0])
    assert record["final_local"]["test_acc"][0] != record["final_local"]["test_acc"][1]
    assert first["test_acc"][1] != record["final_local"]["test_acc"][1]
    # it sent nothing (its 2 ring links), and what was sent to it was lost
    assert df["messages_sent"].iloc[-1] == steps * (E - 2) and df["messages_dropped"].iloc[-1] == steps * 2
    assert df["bits_per_worker"].iloc[-1] == pytest.approx(plain["bits_per_worker"].iloc[-1] * 3 / 4)
    assert record["faults"]["absent"] == [{"worker": 1, "rounds": [0, 1000000]}]
