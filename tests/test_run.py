"""`bench run`: the output contract, determinism, divergence, resume after a kill, bad input."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from bench.cli import main
from bench.run import resolve
from bench.run.driver import identity
from bench.run.parsing import parse_sets
from bench.run.schedule import lr_at

CONTRACT_COLUMNS = ["step", "epoch", "train_loss", "test_loss", "test_acc", "local_test_acc_mean",
                    "consensus_distance", "bits_per_worker", "bits_paper_per_worker", "time_compute_s",
                    "time_comm_s", "time_s", "wall_s", "lr"]
WALL = ["wall_s"]
# a small, fast run: modelled compute time so that time_s is deterministic too
SMALL = ["--task", "mnist1d-mlp", "--algorithm", "choco", "--compressor", "top:0.1", "--topology", "ring",
         "--nodes", "4", "--epochs", "2", "--seed", "3", "--set", "gamma=0.3", "--set", "compute_time=0.01",
         "--set", "task_options.n_train=800", "--set", "task_options.n_test=200", "--set", "eval_every=0.5",
         "--set", "momentum=0.9", "--quiet"]


def metrics(path):
    return pd.read_parquet(Path(path) / "metrics.parquet")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """One run of SMALL, asserted on by several checks (none writes to it)."""
    out = tmp_path_factory.mktemp("small")
    assert main(["run", *SMALL, "--out", str(out)]) == 0
    return out


def test_run_writes_the_contract(small):
    df = metrics(small)
    # every column of the contract, in the contract's order (extra columns may follow or sit between)
    assert [c for c in df.columns if c in CONTRACT_COLUMNS] == CONTRACT_COLUMNS
    assert df["step"].iloc[0] == 0 and df["epoch"].iloc[-1] == pytest.approx(2.0)
    assert len(df) == 5  # step 0 and every half epoch
    assert df["bits_per_worker"].is_monotonic_increasing and df["bits_per_worker"].iloc[0] == 0
    assert (df["time_s"] == df["time_compute_s"] + df["time_comm_s"]).all()
    assert df["time_compute_s"].iloc[-1] == pytest.approx(0.01 * df["step"].iloc[-1])
    info = json.loads((small / "run.json").read_text())
    assert info["status"] == "completed" and info["timing"] == {"compute": "modelled"}  # no measured time to doubt
    assert {"run_id", "config", "topology", "compressor", "task", "provenance", "start_time", "end_time",
            "final"} <= set(info)
    assert info["topology"]["spectral_gap"] == pytest.approx(2 / 3)
    assert info["compressor"]["spec"] == "top:0.1" and 0.1 <= info["compressor"]["delta_measured"] <= 1
    assert info["task"]["n_params"] == 15210 and info["task"]["train_size"] == 800
    # top-10 % of each of the MLP's 6 tensors: 64 bits per kept entry in the paper's accounting
    steps = int(df["step"].iloc[-1])
    kept = sum(max(1, int(0.1 * s)) for s in (4000, 100, 10000, 100, 1000, 10))
    assert df["bits_paper_per_worker"].iloc[-1] == 64 * kept * steps
    assert not list(small.glob(".*tmp*")) and not (small / "checkpoint.pt").exists()
    # learning happened: the averaged model beats chance and the loss fell
    assert df["test_acc"].iloc[-1] > 0.15 and df["train_loss"].iloc[-1] < df["train_loss"].iloc[0]


def test_another_seed_gives_other_metrics(small, tmp_path):
    """(The same seed gives the same metrics: every resumed run below is compared with one never stopped.)"""
    other = [*SMALL[:SMALL.index("--seed") + 1], "4", *SMALL[SMALL.index("--seed") + 2:]]
    main(["run", *other, "--out", str(tmp_path / "c")])
    assert not metrics(tmp_path / "c")["test_loss"].equals(metrics(small)["test_loss"])


def test_divergence_is_a_result(tmp_path, monkeypatch):
    # each span metered: 2 CPU-seconds of 2 cores busy over 1 s, 1 of them the run's own
    monkeypatch.setattr("bench.cpu_meter.CpuMeter.__exit__", lambda meter, *exc: setattr(meter, "result", {
        "method": "proc-stat", "machine_busy_s": 2.0, "own_cpu_s": 1.0, "wall_s": 1.0, "cores": 2}))
    argv = ["run", "--task", "lsq", "--algorithm", "dpsgd", "--topology", "ring", "--nodes", "4", "--epochs", "20",
            "--lr", "50", "--quiet", "--out", str(tmp_path)]
    assert main(argv) == 0
    info = json.loads((tmp_path / "run.json").read_text())
    df = metrics(tmp_path)
    assert info["status"] == "diverged"
    # its compute time was measured (bench run's default): how busy the machine was meanwhile, up to the divergence
    assert [info["timing"][k] for k in ("compute", "others_cpu_share", "cores")] == ["measured", 0.5, 2]
    assert df["step"].iloc[-1] < 20 * info["steps_per_epoch"]  # stopped early
    assert len(df) >= 2 and df["step"].iloc[-1] == info["final"]["step"]
    # the losses are read every LOSS_READ_EVERY steps: the run stops at the read that saw the diverged loss and says
    # the step it came from
    from bench.run.runner import LOSS_READ_EVERY

    assert info["diverged_at_step"] <= info["final"]["step"] < info["diverged_at_step"] + LOSS_READ_EVERY
    assert info["final"]["step"] % LOSS_READ_EVERY == 0 or info["final"]["step"] % info["steps_per_epoch"] == 0


def _cli(argv, **kw):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "bench", *argv], env=env, stderr=subprocess.PIPE, text=True, **kw)


# The reference runs in this process (1 thread, see conftest) and the killed run in a subprocess (the
# machine's threads): one fixed gradient path, whose sums do not depend on the thread count here, keeps
# the two comparable to the last bit (with `auto`, a loaded machine may pick the loop, whose do)
LONG = [*SMALL[: SMALL.index("--epochs") + 1], "20", *SMALL[SMALL.index("--epochs") + 2:],
        "--set", "checkpoint_every=0.25", "--set", "eval_every=1", "--set", "task_options.vectorize=true"]


def test_a_run_whose_pipeline_driver_is_gone_stops_at_a_checkpoint_and_the_same_command_resumes(tmp_path,
                                                                                                monkeypatch):
    """A job of a Snakemake driver killed outright trained on beside the next driver's: it now stops as on SIGTERM
    (bench/run/driver.py). The driver named here is this process under another start time: gone, as after a kill
    whose pid was reused; unless it ran on another machine (a cluster's login node), where its pid says nothing."""
    here = identity().split(":", 2)[2]
    monkeypatch.setenv("CHOCO_DRIVER", f"{os.getpid()}:0:other-boot/pid:[1]")  # a driver on another node: not watched
    argv = ["run", *SMALL, "--out", str(tmp_path)]
    assert main([*argv, "--set", "stop_at=0.5"]) == 0  # trained on to where it was asked to pause
    paused = json.loads((tmp_path / "run.json").read_text())["paused_at_step"]
    monkeypatch.setenv("CHOCO_DRIVER", f"{os.getpid()}:0:{here}")
    assert main(argv) == 128 + signal.SIGTERM
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "interrupted" and record["interrupted_at_step"] == paused + 1, record
    monkeypatch.setenv("CHOCO_DRIVER", identity())  # a live driver's job
    assert main(argv) == 0 and json.loads((tmp_path / "run.json").read_text())["status"] == "completed"


def _wait_for_checkpoint(path, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (path / "checkpoint.pt").exists():
            info = json.loads((path / "run.json").read_text())
            if info.get("status") == "running":
                return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError("no checkpoint appeared")


@pytest.fixture(scope="module")
def long_metrics(tmp_path_factory):
    """The metrics of LONG run once in this process, uninterrupted."""
    out = tmp_path_factory.mktemp("long")
    assert main(["run", *LONG, "--out", str(out)]) == 0
    return metrics(out).drop(columns=WALL)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_run_stopped_by_a_signal_is_finished_by_the_same_command_with_the_metrics_of_one_run(tmp_path, signum,
                                                                                             long_metrics):
    """Killed: the last checkpoint stays and run.json still says running; SIGTERM (a SLURM job's end) or SIGINT
    (Ctrl-C): a checkpoint where it stopped, status `interrupted`, exit 128 + the signal. Either way the same
    command finishes the run, with the metrics of one uninterrupted run."""
    killed = tmp_path / "killed"
    proc = _cli(["run", *LONG, "--out", str(killed)])
    _wait_for_checkpoint(killed, proc)
    if signum == signal.SIGKILL:
        time.sleep(0.3)
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == (-signum if signum == signal.SIGKILL else 128 + signum)
    info = json.loads((killed / "run.json").read_text())
    assert info["status"] == ("running" if signum == signal.SIGKILL else "interrupted")
    assert (killed / "checkpoint.pt").exists()
    assert main(["run", *LONG, "--out", str(killed)]) == 0  # nor does a killed run's lock stop it
    assert json.loads((killed / "run.json").read_text())["status"] == "completed"
    assert not [p for p in killed.iterdir() if p.name.startswith(".")]  # no lock or temporary file left
    pd.testing.assert_frame_equal(metrics(killed).drop(columns=WALL), long_metrics)


TUNED = {"task": "mnist1d-mlp", "algorithm": "choco", "compressor": "sign"}


# resolve(file, flags, --set) -> the settings a run gets: precedence, schedules' inputs, defaults, the tuned recipe
@pytest.mark.parametrize("file, flags, sets, expected", [
    ({"lr": 0.3, "nodes": 16, "task_options": {"hidden": [32]}, "milestones": [5, 8]}, {"nodes": 4},
     {"lr": 0.2, "task_options": {"n_train": 100}},  # --set over flags over the file; groups merge
     {"lr": 0.2, "nodes": 4, "milestones": (5.0, 8.0), "task_options": {"hidden": [32], "n_train": 100}}),
    ({}, {}, {}, {"momentum": 0.9, "nesterov": True, "weight_decay": 1e-4}),  # the paper's optimizer
    ({}, {}, {"momentum": 0}, {"momentum": 0.0, "nesterov": False}),  # momentum 0 is plain SGD
    ({}, {"epochs": 0.015625}, {}, {"epochs": 0.015625}),
    ({}, TUNED, {"recipe": "tuned"}, {"lr": 0.3, "algorithm_options": {"gamma": 0.3}, "momentum": 0.9,
                                      "nesterov": False, "batch_size": 32}),
    ({"momentum": 0.5}, {**TUNED, "lr": 0.05}, {"recipe": "tuned"},  # what is given wins over the recipe
     {"lr": 0.05, "momentum": 0.5, "algorithm_options": {"gamma": 0.3}}),
    ({}, TUNED, {}, {"lr": 0.1}),
    # a knob's shortcut is its algorithm option: within one layer the later spelling wins, a mapping's later key
    # too, and a later layer over an earlier one
    ({}, {}, parse_sets(["algorithm_options={gamma: 0.3, order: code}"]),
     {"algorithm_options": {"gamma": 0.3, "order": "code"}}),
    ({}, {}, parse_sets(["algorithm_options.gamma=0.3", "gamma=0.5"]), {"algorithm_options": {"gamma": 0.5}}),
    ({"gamma": 0.5, "algorithm_options": {"gamma": 0.3}}, {}, {}, {"algorithm_options": {"gamma": 0.3}}),
    ({"algorithm_options": {"gamma": 0.3}}, {}, {"gamma": 0.5}, {"algorithm_options": {"gamma": 0.5}}),
])
def test_settings_resolve_from_file_flags_and_set(file, flags, sets, expected):
    cfg = resolve(file, flags, sets)
    assert {key: getattr(cfg, key) for key in expected} == expected


def test_learning_rate_schedules():
    cfg = resolve({}, {}, {"lr": 1.0, "lr_schedule": "warmup-multistep", "warmup_epochs": 5,
                           "milestones": [150, 225], "lr_decay": 0.1})
    assert lr_at(cfg, 0) == pytest.approx(0.1) and lr_at(cfg, 2.5) == pytest.approx(0.55)
    assert lr_at(cfg, 5) == 1.0 and lr_at(cfg, 149.9) == 1.0
    assert lr_at(cfg, 150) == pytest.approx(0.1) and lr_at(cfg, 300) == pytest.approx(0.01)
    exp = resolve({}, {}, {"lr": 0.5, "lr_schedule": "exp", "lr_decay": 0.9})
    assert lr_at(exp, 3) == pytest.approx(0.5 * 0.9 ** 3)


def test_gradient_clipping_per_worker():
    from bench.run.runner import clip_rows_

    g = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    clip_rows_(g, 1.0)
    torch.testing.assert_close(g, torch.tensor([[0.6, 0.8], [0.3, 0.4]]))


def test_cuda_device_runs_where_a_gpu_exists_and_is_a_clear_error_elsewhere(tmp_path, capsys):
    status = main(["run", *SMALL, "--device", "cuda", "--out", str(tmp_path)])
    if torch.cuda.is_available():
        assert status == 0 and json.loads((tmp_path / "run.json").read_text())["status"] == "completed"
    else:
        assert status == 2 and "no CUDA GPU" in capsys.readouterr().err


def test_one_worker_is_plain_sgd_for_allreduce_dpsgd_and_choco(tmp_path):
    # n = 1: no neighbour to average with, so every method takes the same SGD steps from the same seed
    base = ["--task", "lsq", "--topology", "complete", "--nodes", "1", "--epochs", "0.25", "--seed", "1",
            "--set", "batch_size=4", "--set", "lr=0.05", "--set", "eval_every=0.05", "--set", "compute_time=0.01",
            "--set", "momentum=0", "--set", "weight_decay=0", "--quiet"]
    runs = {}
    for algorithm, compressor in [("allreduce", "none"), ("dpsgd", "none"), ("choco", "sign")]:
        out = tmp_path / algorithm
        assert main(["run", *base, "--algorithm", algorithm, "--compressor", compressor, "--out", str(out)]) == 0
        runs[algorithm] = metrics(out)
        info = json.loads((out / "run.json").read_text())
        assert info["status"] == "completed" and info["topology"]["spectral_gap"] == 1.0
    # 250 steps an epoch (1000 samples, batch 4): ceil(62.5) = 63 steps, evaluated at 0 and every 12
    assert runs["choco"]["step"].tolist() == [0, 12, 24, 36, 48, 60, 63]
    assert json.loads((tmp_path / "choco" / "run.json").read_text())["gamma"]["source"].startswith("single worker")
    for algorithm in ("dpsgd", "choco"):
        pd.testing.assert_series_equal(runs[algorithm]["train_subopt"], runs["allreduce"]["train_subopt"])
    assert runs["allreduce"]["train_subopt"].iloc[-1] < 0.1 * runs["allreduce"]["train_subopt"].iloc[0]
    assert (runs["choco"]["consensus_distance"] == 0).all()


def test_every_local_model_is_scored_at_the_end_and_a_sample_before(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "--task", "mnist1d-mlp", "--nodes", "4", "--epochs", "1", "--compressor", "sign",
                 "--set", "gamma=0.3", "--set", "eval_every=0.5", "--set", "eval_local_workers=1",
                 "--set", "task_options.n_train=400", "--set", "task_options.n_test=100", "--quiet",
                 "--out", str(out)]) == 0
    m = metrics(out)
    assert m["local_evaluated"].tolist()[:-1] == [1] * (len(m) - 1) and m["local_evaluated"].iloc[-1] == 4
    final = json.loads((out / "run.json").read_text())["final_local"]
    accs = final["test_acc"]
    assert final["step"] == m["step"].iloc[-1] and len(accs) == 4 and len(set(accs)) > 1  # the workers differ
    assert m["local_test_acc_mean"].iloc[-1] == pytest.approx(sum(accs) / 4)
    assert m["local_test_acc_min"].iloc[-1] == min(accs) and m["local_test_acc_max"].iloc[-1] == max(accs)
    assert m["local_test_acc_std"].iloc[-1] == pytest.approx(float(pd.Series(accs).std(ddof=0)))


def test_a_run_paused_at_stop_at_and_continued_equals_one_run(tmp_path):
    """Successive halving's rungs: pause at 0.5 epochs (checkpoint kept), continue to 1.5, then to the end;
    the metrics are those of one uninterrupted run, and the run keeps one identity throughout."""
    argv = [*SMALL[: SMALL.index("--epochs") + 1], "2", *SMALL[SMALL.index("--epochs") + 2:],
            "--set", "eval_every=0.25"]
    assert main(["run", *argv, "--out", str(tmp_path / "whole")]) == 0
    rungs = tmp_path / "rungs"
    for stop in ("0.5", "1.5"):
        assert main(["run", *argv, "--set", f"stop_at={stop}", "--out", str(rungs)]) == 0
        info = json.loads((rungs / "run.json").read_text())
        assert info["status"] == "paused" and (rungs / "checkpoint.pt").exists()
        assert metrics(rungs)["epoch"].iloc[-1] == float(stop)
    assert main(["run", *argv, "--out", str(rungs)]) == 0
    info = json.loads((rungs / "run.json").read_text())
    assert info["status"] == "completed" and not (rungs / "checkpoint.pt").exists()
    assert info["run_id"] == json.loads((tmp_path / "whole" / "run.json").read_text())["run_id"]
    whole, parts = metrics(tmp_path / "whole"), metrics(rungs)
    # the pauses add evaluations at 0.5 and 1.5 epochs (what a rung is judged on); every other row is the
    # same, but for the workers' minibatch loss averaged since the previous evaluation (a shorter window)
    assert sorted(set(parts["epoch"]) - set(whole["epoch"])) == [0.5, 1.5]
    shared = parts[parts["step"].isin(whole["step"])].reset_index(drop=True)
    window = [*WALL, "train_loss_workers"]
    pd.testing.assert_frame_equal(shared.drop(columns=window), whole.drop(columns=window))


def test_each_evaluations_train_loss_is_the_mean_of_every_step_since_the_last(tmp_path):
    """The runner reads the steps' losses (a mean over the workers each) every LOSS_READ_EVERY steps and at every
    evaluation: every step counts once. Evaluated after every step, a run gives each step's loss (evaluating
    changes no step); evaluated once an epoch, each row is the mean of its epoch's steps."""
    from bench.run.runner import LOSS_READ_EVERY

    argv = ["run", *SMALL, "--set", "task_options.n_train=3200"]
    assert main([*argv, "--set", "eval_every=1", "--out", str(tmp_path / "epochs")]) == 0
    spe = json.loads((tmp_path / "epochs" / "run.json").read_text())["steps_per_epoch"]
    assert spe > LOSS_READ_EVERY > 1  # several reads an epoch
    assert main([*argv, "--set", f"eval_every={1 / spe}", "--out", str(tmp_path / "steps")]) == 0
    per_step = metrics(tmp_path / "steps").set_index("step")["train_loss_workers"]
    per_epoch = metrics(tmp_path / "epochs").set_index("step")["train_loss_workers"]
    assert len(per_step) == 2 * spe + 1
    for e in (1, 2):
        assert per_epoch[e * spe] == pytest.approx(per_step.loc[(e - 1) * spe + 1:e * spe].mean(), rel=1e-9)
