"""One cache (issue 15): its folder is computed in one place, and parallel jobs that add entries to one
cache file, or make one data set, keep each other's work."""
import json
import multiprocessing
import re
import time
from pathlib import Path

import numpy as np
import pytest

import bench.algorithms.step_tuning as schedule
from bench.cache import cache_dir, cache_path, locked, update_json
from bench.errors import BenchError

WORKERS, KEYS = 4, 10
FORK = multiprocessing.get_context("fork")  # the children inherit the monkeypatches below


def _add_gammas(path, worker, barrier):
    barrier.wait()
    for i in range(KEYS):
        schedule.store_gamma(path, f"ring|{worker}|{i}", 0.5)


def test_parallel_jobs_keep_each_others_gamma_values(tmp_path, monkeypatch):
    """WORKERS processes, started together, each add KEYS distinct γ values to one cache file, with the window
    between reading the cache and writing it back widened, as a busy machine does."""
    real = schedule.read_gamma_cache

    def slow(path):
        data = real(path)
        time.sleep(0.02)
        return data

    monkeypatch.setattr(schedule, "read_gamma_cache", slow)
    path = tmp_path / "gamma.json"
    path.write_text(json.dumps({"earlier|entry": 0.25}))
    barrier = FORK.Barrier(WORKERS)
    procs = [FORK.Process(target=_add_gammas, args=(path, w, barrier), daemon=True) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    cache = json.loads(path.read_text())
    assert len(cache) == WORKERS * KEYS + 1 and cache["earlier|entry"] == 0.25
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gamma.json.lock", "gamma.json"]  # no temp files


def test_a_gamma_stored_meanwhile_is_kept_and_a_damaged_cache_is_left_alone(tmp_path):
    path = tmp_path / "gamma.json"
    path.write_text(json.dumps({"ring|4": 0.25}))
    assert schedule.store_gamma(path, "ring|4", 0.5) == 0.25  # tuning is deterministic: the first stays
    assert schedule.store_gamma(path, "ring|8", 0.5) == 0.5
    assert json.loads(path.read_text()) == {"ring|4": 0.25, "ring|8": 0.5}
    path.write_text("{not json")
    with pytest.raises(BenchError, match=re.escape(str(path))):
        schedule.store_gamma(path, "ring|16", 0.5)
    assert path.read_text() == "{not json"


def test_update_json_keeps_only_what_keep_accepts(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"a": "junk", "b": {"path": "loop"}}))
    valid = lambda v: isinstance(v, dict)  # noqa: E731
    assert update_json(path, "a", {"path": "vmap"}, keep=valid) == {"path": "vmap"}  # junk replaced
    assert update_json(path, "b", {"path": "vmap"}, keep=valid) == {"path": "loop"}  # kept
    assert update_json(path, "b", {"path": "vmap"}) == {"path": "vmap"}  # without keep: replaced
    path.write_text("[1, 2]")
    with pytest.raises(BenchError, match=re.escape(str(path))):
        update_json(path, "a", 1)


def _load_waiting(root, held, started):
    from bench.data.mnist1d import load_mnist1d

    held.wait(60)
    started.set()
    data = load_mnist1d(str(root), 0, n_train=5, n_test=5)
    raise SystemExit(0 if not data.train_x.numpy().any() else 3)  # the zeros written while it waited


def test_a_data_set_made_while_a_job_waited_is_read_not_made_again(tmp_path, monkeypatch):
    import bench.data.mnist1d as mnist1d
    from bench.data.base import save_npz_atomic

    def must_not_generate(seed, total):
        raise AssertionError("generated again")

    monkeypatch.setattr(mnist1d, "_generate", must_not_generate)
    path = tmp_path / "mnist1d_seed0_train5_test5.npz"
    held, started = FORK.Event(), FORK.Event()
    # started before the lock is taken: a child forked under it would hold it too (flock is per open file)
    waiting = FORK.Process(target=_load_waiting, args=(tmp_path, held, started), daemon=True)
    waiting.start()
    try:
        with locked(path):  # this test is the job making the data set
            held.set()
            assert started.wait(60)
            time.sleep(0.3)
            assert waiting.is_alive()  # it waits for the lock
            save_npz_atomic(path, x=np.zeros((10, 40), dtype=np.float32), y=np.zeros(10, dtype=np.int64))
        waiting.join(60)
        assert waiting.exitcode == 0
    finally:
        if waiting.is_alive():
            waiting.kill()


def test_the_cache_folder_is_the_environments_or_the_users(tmp_path, monkeypatch):
    monkeypatch.setenv("CHOCO_BENCH_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path and cache_path("gamma.json") == tmp_path / "gamma.json"
    monkeypatch.delenv("CHOCO_BENCH_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "choco-bench"
