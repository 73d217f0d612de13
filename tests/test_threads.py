"""A run whose every tensor is small takes one intra-op thread (bench/run/threads.py): the rule, what run.json
says of it, a thread count the user set kept, and the belief the rule rests on, that one thread and two give
the same bits on such a problem."""
from __future__ import annotations

import json

import pytest
import torch

from bench.run import start
from bench.run.threads import SMALL, settle


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def lsq(tmp_path, name, **extra):
    # full-batch least squares as `bench perf`'s group h runs it (bench/perf/peers.py), a few rounds: batches
    # [16, 16, 200], just under the rule's bound, where torch splits some operations over its threads
    settings = {"task": "lsq", "algorithm": "dpsgd", "compressor": "none", "topology": "ring", "nodes": 16,
                "data": "split", "batch_size": 16, "epochs": 13, "stop_at": 12, "lr": 0.01, "momentum": 0.0,
                "eval_every": 12, "checkpoint_every": 12, "algorithm_options": {"order": "paper"},
                "task_options": {"dim": 200, "n_train": 256, "n_test": 256}, "quiet": True, **extra}
    assert start(settings, tmp_path / name) == 0
    record = json.loads((tmp_path / name / "run.json").read_text())
    return torch.load(tmp_path / name / "checkpoint.pt", weights_only=False)["algo"]["x"], record


def test_the_rule(restore_threads):
    torch.set_num_threads(2)
    assert settle(None, {}) == "torch's default" and torch.get_num_threads() == 2
    assert "torch's default" in settle(SMALL + 1, {}) and torch.get_num_threads() == 2


def test_a_small_run_takes_one_thread_with_the_same_bits_as_two(tmp_path, monkeypatch, restore_threads):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(2)
    x_one, record = lsq(tmp_path, "small")
    assert SMALL / 2 < 16 * 16 * 200 <= SMALL
    assert record["provenance"]["torch_threads"] == 1
    assert "one thread" in record["provenance"]["torch_threads_reason"]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's count is kept
    torch.set_num_threads(2)
    x_two, record = lsq(tmp_path, "two")
    assert record["provenance"]["torch_threads"] == 2
    assert record["provenance"]["torch_threads_reason"] == "OMP_NUM_THREADS"
    assert torch.equal(x_one, x_two)
