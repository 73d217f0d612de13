"""The CPU stand-in of Table 1 (config/table1-cnn.yaml): MNIST-1D's 1-D CNN on 20,000 generated signals, the
existing `mnist1d-cnn` task with larger data options. It builds at the promised size, its cells train, and the
tasks it borrows from keep their defaults (their run ids are pinned elsewhere)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import bench.data.mnist1d as mnist1d
from bench.pipeline import Study
from bench.run import run
from bench.tasks import TASKS, TaskSetup, check_option_values, make_task, task_option_names

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "config" / "table1-cnn.yaml").read_text())
STUDY = Study(CONFIG)
SIZES = {"n_train": 20000, "n_test": 2000}  # what the study's header promises


def _fake_generate(seed, total):
    """Stand-in for the MNIST-1D generator with its output's shapes and types (generating 22,000 signals
    takes ~15 s; test_the_real_generator_gives_the_promised_data_set runs it on a tenth)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((total, 40)).astype(np.float32), (np.arange(total) % 10).astype(np.int64)


def _setup(options, n=8, batch=32):
    return TaskSetup(n_workers=n, batch_size=batch, data="shuffle", seed=0, data_root=None, options=options)


def test_the_study_runs_mnist1d_cnn_at_the_promised_size_in_every_cell():
    assert STUDY.task == "mnist1d-cnn" and len(STUDY.cells) == 49  # 33 compressed + 2 reference + 14 non-i.i.d.
    for settings in STUDY.cells.values():
        cfg = STUDY.run_config(settings)
        assert cfg.task == "mnist1d-cnn" and dict(cfg.task_options) == SIZES
        assert cfg.nodes == 8 and cfg.topology == "ring" and cfg.batch_size == 32
    # every option is one the task knows, of the right type (the task would refuse it otherwise)
    assert set(SIZES) <= set(task_option_names("mnist1d-cnn"))
    check_option_values("mnist1d-cnn", SIZES)


def test_the_borrowed_tasks_keep_their_defaults_and_the_standin_changes_only_the_data_size():
    # the defaults the existing runs were made with (their run ids depend on them)
    assert TASKS.get("mnist1d-cnn").options == {"eval_batch": 1000, "vectorize": "auto", "n_train": 4000,
                                                  "n_test": 1000, "channels": 25}
    assert TASKS.get("mnist1d-mlp").options == {"eval_batch": 1000, "vectorize": "auto", "n_train": 4000,
                                                  "n_test": 1000, "hidden": (100, 100)}
    assert TASKS.get("digits-mlp").options == {"eval_batch": 1000, "vectorize": "auto", "hidden": (64,)}
    standin = {**TASKS.get("mnist1d-cnn").options, **CONFIG["defaults"]["task_options"]}
    changed = {k for k, v in standin.items() if TASKS.get("mnist1d-cnn").options[k] != v}
    assert changed == {"n_train", "n_test"}  # same model (channels) and evaluation, more data
    assert TASKS.get("mnist1d-cnn").examples[0]["task_options"] == {"n_train": 200, "n_test": 100}


def test_the_standin_task_builds_at_its_size_with_the_default_model(monkeypatch, tmp_path):
    monkeypatch.setattr(mnist1d, "_generate", _fake_generate)
    monkeypatch.setenv("CHOCO_BENCH_CACHE", str(tmp_path))  # the fake signals never reach another test's cache
    task = make_task("mnist1d-cnn", _setup(dict(CONFIG["defaults"]["task_options"])))
    assert (task.train_size, task.test_size) == (20000, 2000)
    assert tuple(task.train_x.shape) == (20000, 40) and tuple(task.test_x.shape) == (2000, 40)
    assert task.steps_per_epoch == 20000 // (8 * 32)  # 78 steps of 8 x 32 signals an epoch
    default = make_task("mnist1d-cnn", _setup({}))
    assert default.train_size == 4000 and task.d == default.d == 7710  # the model is mnist1d-cnn's own


@pytest.mark.slow
def test_the_real_generator_gives_the_promised_data_set():
    """At a tenth of the study's size (what holds of the set holds at any size; 22,000 signals take ~15 s)."""
    data = mnist1d.load_mnist1d(None, 0, n_train=2000, n_test=200)  # cached under the test's private cache
    assert tuple(data.train_x.shape) == (2000, 40) and tuple(data.test_x.shape) == (200, 40)
    counts = np.bincount(np.concatenate([data.train_y.numpy(), data.test_y.numpy()]), minlength=10)
    assert (counts == 220).all()  # the generator makes equal samples per digit before the split
    assert set(np.unique(data.test_y.numpy())) == set(range(10))
    x = np.concatenate([data.train_x.numpy(), data.test_x.numpy()]).astype(np.float64)
    assert abs(x.mean()) < 1e-4 and abs(x.std() - 1) < 1e-4  # the generator standardises the whole set


def test_one_step_of_a_choco_sign_cell_trains_on_a_tiny_subset(tmp_path):
    # the study's own cell, on 400 signals (one step of 8 workers x 32), γ fixed so no γ search runs; the
    # per-worker loop, as the first vmap trace costs seconds (tests/test_tasks.py checks the paths agree)
    settings = {**STUDY.cells["choco-sign_ring8"], "epochs": 1, "gamma": 0.3, "quiet": True,
                "task_options": {"n_train": 400, "n_test": 100, "vectorize": False}}
    cfg = STUDY.run_config(settings)
    assert list(cfg.milestones) == [10, 15] and cfg.lr_schedule == "warmup-multistep" and cfg.lr == 0.1
    assert run(cfg, tmp_path) == 0
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "completed" and info["task"]["train_size"] == 400
    df = pd.read_parquet(tmp_path / "metrics.parquet")
    assert list(df["step"]) == [0, 1]
    assert np.isfinite(df["train_loss"]).all() and df["train_loss"].iloc[1] != df["train_loss"].iloc[0]
    # one sign message (1 bit an entry, plus a scale per tensor) to each of the 2 ring neighbours
    assert 2 * 7710 <= df["bits_per_worker"].iloc[1] < 2 * 7710 * 2
