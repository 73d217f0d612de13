"""End-to-end studies that several test files read, built once per `make test` however many workers it runs.

`make test` runs its files on every core (pytest-xdist, a file to a worker). A study one file builds in a
module fixture is built once; a study that files in different rooms read (the pipeline's interruption test,
the report's browser tests) would be built once per worker that asks. `once` builds it under a lock in the
folder all workers share, and every later caller reads what the first one wrote.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def shared_root(tmp_path_factory) -> Path:
    """The folder every worker of this session sees (the parent of the workers' own base folders)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory, name: str, build: Callable[[Path], dict]) -> tuple[Path, dict]:
    """``build(folder)`` run by the first caller of this session, which returns what it saw (JSON); every
    caller gets the folder and that record. A build that failed is raised again to each caller."""
    root = shared_root(tmp_path_factory)
    folder, record = root / name, root / f"{name}.json"
    with FileLock(str(root / f"{name}.lock")):
        if not record.exists():
            folder.mkdir(exist_ok=True)
            try:
                seen = {"ok": True, "seen": build(folder)}
            except BaseException as err:  # an AssertionError of the build: every reader fails with it
                seen = {"ok": False, "error": f"{type(err).__name__}: {err}"[-4000:]}
            record.write_text(json.dumps(seen))
    seen = json.loads(record.read_text())
    if not seen["ok"]:
        raise AssertionError(f"the shared study {name!r} failed to build: {seen['error']}")
    return folder, seen["seen"]


def snakemake(*args: str, cwd: Path = ROOT, check: bool = True, path: str | None = None) -> subprocess.CompletedProcess:
    """Snakemake on ``args``, with the interpreter's folder first on PATH unless ``path`` is given."""
    env = {**os.environ, "PATH": path or f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run([*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc


def completed_runs(study: Path) -> dict[str, int]:
    """run folder -> metrics.parquet mtime of every run that finished (completed or diverged)."""
    done = {}
    for run_json in (study / "runs").glob("*/run.json"):
        try:
            status = json.loads(run_json.read_text())["status"]
        except (OSError, ValueError, KeyError):  # a run.json being written
            continue
        metrics = run_json.parent / "metrics.parquet"
        if status in ("completed", "diverged") and metrics.exists():
            done[run_json.parent.name] = metrics.stat().st_mtime_ns
    return done


def interrupted_test_study(where: Path) -> dict:
    """config/test.yaml through the pipeline as a user meets it: the README's `.venv/bin/snakemake ...` with no
    environment activated (no `python` on PATH, so every rule must run Snakemake's own interpreter), the driver
    killed outright (SIGKILL, itself only: its jobs stop when they see it gone) after the fourth finished run, the
    same command again with --rerun-incomplete and no --unlock, then `snakemake --report`. What it
    saw on the way (the runs finished at the signal and after, with their mtimes) is the record that the
    interruption test asserts on; the finished study is what the report's browser tests open."""
    config = str(ROOT / "config/test.yaml")
    study = where / "results" / "test"
    bare = "/usr/bin:/bin"
    env = {**os.environ, "PATH": bare}

    proc = subprocess.Popen([*SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), "--cores", "2", "--configfile",
                             config, "--directory", str(where)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while len(completed_runs(study)) < 4 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    at_signal = len(completed_runs(study))
    os.kill(proc.pid, signal.SIGKILL)  # as the OOM killer would: Snakemake's locks and its jobs are left behind
    proc.wait(timeout=120)
    finished = completed_runs(study)
    summary_before = (study / "summary.csv").exists()
    snakemake("--cores", "2", "--rerun-incomplete", "--configfile", config, "--directory", str(where), path=bare)
    after = completed_runs(study)
    snakemake("--configfile", config, "--directory", str(where), "--report", str(where / "snakemake-report.html"),
              path=bare)
    return {"at_signal": at_signal, "finished": finished, "after": after, "summary_before_rerun": summary_before}
