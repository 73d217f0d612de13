"""A run never ends saying ``running``: a setting its BatchNorm layers cannot train on is refused before the run
starts, and an error inside the runner, foreseen or not, leaves run.json ``failed`` with the reason and one line
on stderr."""
import errno
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from torch import nn

from bench.cli import main
from bench.errors import BenchError
from bench.models import make_model
from bench.run import resolve
from bench.run.runner import Loop
from bench.tasks.batchnorm import check_batchnorm_batch
from datafiles import write_imagefolder
from hostile import refused, temps
from test_run import SMALL, WALL, metrics


def _record(out):
    return json.loads((out / "run.json").read_text())


# ---- 1. BatchNorm and the per-worker batch --------------------------------------------------------
IMAGENET_B1 = ["run", "--task", "imagenet-resnet50", "--algorithm", "choco", "--compressor", "sign", "--topology",
               "ring", "--nodes", "3", "--epochs", "1", "--batch-size", "1", "--set", "gamma=0.3",
               "--set", "task_options.size=8", "--quiet"]


def test_resnet50_at_size_8_and_batch_1_is_refused_before_the_run_and_changes_no_file(tmp_path, capsys):
    """Bad input changes no file: no run directory for a fresh run, and a run.json of the same settings that an
    earlier attempt left stays byte for byte (an unforeseen error marks it failed instead: see below)."""
    root = write_imagefolder(tmp_path / "imagenet")
    argv, out = [*IMAGENET_B1, "--set", f"data_root={root}", "--out", str(tmp_path / "run")], tmp_path / "run"
    refused(main, argv, capsys, "batch_size=1", "BatchNorm layer", "batch_size >= 2")
    assert not out.exists()  # no run directory, no run.json saying running
    out.mkdir()
    flags = {"task": "imagenet-resnet50", "algorithm": "choco", "compressor": "sign", "topology": "ring",
             "nodes": 3, "epochs": 1.0, "batch_size": 1, "quiet": True}
    cfg = resolve({}, flags, {"gamma": 0.3, "task_options": {"size": 8}, "data_root": str(root)})
    earlier = json.dumps({"run_id": cfg.run_id(), "fingerprint": cfg.fingerprint(), "status": "running"})
    (out / "run.json").write_text(earlier)
    refused(main, argv, capsys, "BatchNorm layer")  # this run's refusal, not another one's
    assert (out / "run.json").read_text() == earlier and sorted(p.name for p in out.iterdir()) == ["run.json"]


class _BNHead(nn.Module):
    """A BatchNorm1d after a linear layer: one value per channel at batch 1, whatever the input."""

    def __init__(self):
        super().__init__()
        self.fc, self.bn = nn.Linear(6, 4), nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.fc(x))


CASES = [("resnet50", {}, (3, 8, 8), 1), ("resnet50", {}, (3, 8, 8), 2), ("resnet50", {}, (3, 32, 32), 1),
         ("resnet50", {}, (3, 64, 64), 1), ("resnet8", {"num_classes": 10}, (3, 32, 32), 1),
         ("bn-head", {}, (6,), 1), ("bn-head", {}, (6,), 3)]


@pytest.mark.parametrize("name, kwargs, shape, batch", CASES)
def test_the_check_refuses_exactly_what_batchnorm_cannot_train_on(name, kwargs, shape, batch):
    """The check traces shapes only; its verdict is torch's own: a training forward pass on real tensors raises
    'Expected more than 1 value per channel' exactly where the check refuses."""
    torch.manual_seed(0)
    model = _BNHead() if name == "bn-head" else make_model(name, **kwargs)
    try:
        check_batchnorm_batch(name, model, shape, batch)
        refused = False
    except BenchError as err:
        refused = True
        assert f"batch_size={batch}" in str(err)
    model.train()
    try:
        model(torch.randn(batch, *shape))
        torch_refuses = False
    except ValueError as err:
        assert "more than 1 value per channel" in str(err)
        torch_refuses = True
    assert refused == torch_refuses
    assert model.training  # the check leaves the model's mode as it was


# ---- 2. errors inside the runner ------------------------------------------------------------------
def _failing_step(monkeypatch, error, after=3):
    real, calls = Loop.step, []

    def step(self, batch):
        calls.append(1)
        if len(calls) > after:
            raise error
        return real(self, batch)

    monkeypatch.setattr(Loop, "step", step)


def _full_disk_at_the_third_checkpoint(monkeypatch):
    real, calls = torch.save, []

    def fill(obj, where, *args, **kwargs):  # writes a part, then finds the disk full
        calls.append(1)
        if len(calls) <= 2:
            return real(obj, where, *args, **kwargs)
        where.write(b"\0" * 4096) if hasattr(where, "write") else Path(where).write_bytes(b"\0" * 4096)
        raise OSError(errno.ENOSPC, "No space left on device", str(getattr(where, "name", where)))

    monkeypatch.setattr(torch, "save", fill)


def _end_not_written(error):
    """The final metrics cannot be written: pyarrow's writer (what write_metrics writes with) fails."""
    def broken(table, where, *args, **kwargs):
        where.write_bytes(b"\0" * 4096)  # a part written to the temporary file (bench.files.atomic_write's)
        raise error

    return lambda monkeypatch: monkeypatch.setattr(pq, "write_table", broken)


IMG7 = "data/img7.JPEG"
# how the run fails -> (the failure put in, the words of its line and of run.json's error, the exit status)
FAILURES = {
    "a step": (lambda mp: _failing_step(mp, ValueError("boom in a step\nsecond line"), after=8),
               ["stopped at step 8", "ValueError: boom in a step"], 1),
    "bad input found mid-run": (lambda mp: _failing_step(mp, BenchError(f"{IMG7} is not an image"), after=8),
                                [f"bench: error: {IMG7} is not an image"], 2),  # the line is BenchError's alone
    "a full disk at a checkpoint": (_full_disk_at_the_third_checkpoint, ["No space left on device"], 1),
    "a library error at the end": (_end_not_written(TypeError("cannot convert column")), ["cannot convert column"], 1),
    "a full disk at the end": (_end_not_written(OSError(errno.ENOSPC, "No space left on device")),
                               ["No space left on device"], 1),
}
CHECKPOINTED = [*SMALL, "--set", "checkpoint_every=0.5"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "run"
    assert main(["run", *CHECKPOINTED, "--out", str(out)]) == 0
    return metrics(out).drop(columns=WALL)


@pytest.mark.parametrize("failure", FAILURES)
def test_an_error_mid_run_fails_it_with_its_reason_and_the_same_command_finishes(failure, reference, tmp_path,
                                                                                  monkeypatch, capsys):
    """run.json says failed with the reason (its first line on stderr; status 1, bad input 2), no temporary file is
    left, the checkpoint is kept, and the same command then finishes with the metrics of one run."""
    out, (fail, words, code) = tmp_path / "run", FAILURES[failure]
    fail(monkeypatch)
    line = refused(main, ["run", *CHECKPOINTED, "--out", str(out)], capsys, *words, code=code)
    assert "second line" not in line and (code == 1 or line == words[0])
    record = _record(out)
    assert record["status"] == "failed" and words[-1].removeprefix("bench: error: ") in record["error"]
    assert code == 1 or (record["error"] == f"{IMG7} is not an image" and "traceback" not in record)
    assert (out / "checkpoint.pt").exists() and not temps(out)
    if failure == "a step":
        assert record["error"].startswith(words[-1]) and "(at bench/run/runner.py:" in record["error"]
        assert words[-1] in record["traceback"] and "end_time" in record
        assert len(metrics(out)) >= 2 and record["final"]["step"] == metrics(out)["step"].iloc[-1]
    monkeypatch.undo()
    assert main(["run", *CHECKPOINTED, "--out", str(out)]) == 0
    assert _record(out)["status"] == "completed" and not temps(out)
    pd.testing.assert_frame_equal(metrics(out).drop(columns=WALL), reference)


def test_an_error_before_the_first_step_leaves_nothing_that_says_running(tmp_path, monkeypatch, capsys):
    """Fresh run: the error comes before run.json is written, so nothing is left; one line, status 1. Resumed
    run: the run.json its earlier attempt left saying running says failed."""
    import bench.run.launch as launch

    def broken_build(*args, **kwargs):
        raise RuntimeError("no kernel for this device")

    out = tmp_path / "run"
    monkeypatch.setattr(launch, "build", broken_build)
    refused(main, ["run", *SMALL, "--out", str(out)], capsys, "could not start", "RuntimeError: no kernel", code=1)
    assert not out.exists()
    monkeypatch.undo()
    assert main(["run", *SMALL, "--set", "stop_at=1", "--out", str(out)]) == 0  # paused at epoch 1
    record = _record(out)
    (out / "run.json").write_text(json.dumps({**record, "status": "running"}))  # as if killed there
    monkeypatch.setattr(launch, "build", broken_build)
    assert main(["run", *SMALL, "--set", "stop_at=1", "--out", str(out)]) == 1
    after = _record(out)
    assert after["status"] == "failed" and "no kernel for this device" in after["error"]
    assert after["fingerprint"] == record["fingerprint"] and "no kernel" in after["traceback"]
