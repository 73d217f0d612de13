"""Tracking one's own code over commits: bench track --benchmarks runs asv-style benchmark files (time_*,
track_*) in each commit of any git project, and analysis history finds the commit that changed a number."""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from analysis.cli import main as analysis_main
from analysis.history import read_output
from bench.cli import main as bench_main
from bench import track as track_package
from bench.track import benchfile
from hostile import ROOT, refused
from track_records import git_repo

BENCH = '''
import mylib


def time_work():
    mylib.work()
time_work.repeat = 3


def track_value():
    return mylib.VALUE
track_value.unit = "loss"
track_value.repeat = 3
track_value.kind = "accuracy"


class Suite:
    repeat = 2

    def setup(self):
        self.data = list(range(1000))

    def time_sort(self):
        sorted(self.data)

    def track_length(self):
        return len(self.data)
    track_length.higher_is_better = True


def track_skipped():
    return 1
'''


def test_the_runner_reads_asv_benchmarks_and_reports_each_failure_on_its_own(tmp_path, monkeypatch):
    (tmp_path / "mylib.py").write_text("VALUE = 0.5\ndef work():\n    return sum(range(1000))\n")
    (tmp_path / "bench_mine.py").write_text(BENCH + "\ndef setup():\n    pass\n\n"
                                            "def track_broken():\n    raise KeyError('x')\n\n"
                                            "def track_text():\n    return 'fast'\n\n"
                                            "def time_many():\n    pass\ntime_many.params = [1, 2]\n")
    (tmp_path / "bench_empty.py").write_text("x = 1\n")
    (tmp_path / "bench_bad.py").write_text("import no_such_module_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = benchfile.run([str(tmp_path / f"bench_{name}.py") for name in ("mine", "empty", "bad")])
    figs = result["figures"]
    assert set(figs) == {"bench_mine.time_work", "bench_mine.track_value", "bench_mine.Suite.time_sort",
                         "bench_mine.Suite.track_length", "bench_mine.track_skipped"}
    work = figs["bench_mine.time_work"]
    assert len(work["values"]) == 3 and all(v > 0 for v in work["values"]) and work["unit"] == "s"
    assert work["kind"] == "absolute" and work["higher_is_better"] is False and work["timed"] is True
    value = figs["bench_mine.track_value"]
    assert value["values"] == [0.5] * 3 and value["unit"] == "loss" and value["kind"] == "accuracy"
    assert value["timed"] is False
    assert figs["bench_mine.Suite.track_length"]["values"] == [1000.0, 1000.0]  # the class's repeat
    assert figs["bench_mine.Suite.track_length"]["higher_is_better"] is True
    errors = "\n".join(result["errors"])
    assert "bench_mine.track_broken: KeyError" in errors and "bench_mine.track_text: ValueError: returned 'fast'" in errors
    assert "bench_mine.time_many: ValueError: asv 'params' are not supported" in errors
    assert "bench_empty.py: no time_* or track_* benchmarks" in errors
    assert "bench_bad.py: cannot be imported: ModuleNotFoundError" in errors  # the other files still ran


def test_a_project_of_ones_own_is_tracked_over_its_commits(tmp_path, capsys, monkeypatch):
    # the tracker (this checkout, often being edited) taken as clean, as in tests/test_track.py
    monkeypatch.setattr(track_package.quickset, "tracker_state", lambda repo: {
        "commit": None, "same_checkout": False, "dirty": False, "dirty_files": []})
    # any git project, not this suite: 6 commits, the tracked value worsens at commit 4 (index 3)
    repo = tmp_path / "project"
    repo.mkdir()
    commits = git_repo(repo, 6, change=lambda i: (repo / "mylib.py").write_text(
        f"VALUE = {0.5 if i < 3 else 0.9}\ndef work():\n    return sum(range({1000 + i}))\n"))
    bench = tmp_path / "benchmarks"  # kept apart from the project: the same benchmarks measure every commit
    bench.mkdir()
    (bench / "bench_mine.py").write_text(BENCH)
    out = tmp_path / "history"
    track = ["track", "--repo", str(repo), "--benchmarks", str(bench), "--out", str(out), "--quiet"]
    assert bench_main(track) == 2  # the quick set of this suite needs this suite
    assert "or --parts user to run only your --benchmarks" in capsys.readouterr().err
    assert bench_main([*track, "--parts", "user", "--commits", ",".join(commits)]) == 0
    records = [json.loads(p.read_text()) for p in out.rglob("*.json") if p.name != "machine.json"]
    assert len({r["commit"] for r in records}) == 6
    assert all(r["parts"] == ["user"] and r["errors"] == [] and "perf" not in r for r in records)
    assert all(r["user"]["files"] == ["bench_mine.py"] for r in records)
    capsys.readouterr()
    report = tmp_path / "report"
    status = analysis_main(["history", str(out), "--repo", str(repo), "--out", str(report), "--no-figures"])
    steps = read_output(report / "steps.csv")
    step = steps[steps["quantity"] == "user.bench_mine.track_value"]
    assert len(step) == 1 and step.iloc[0]["first_commit"] == commits[3][:12]
    assert step.iloc[0]["verdict"] == "regression"  # 0.5 -> 0.9 loss, lower is better, beyond 2 points
    assert status == 0  # the newest commit is not where it started
    assert "user.bench_mine.Suite.track_length" in set(read_output(report / "newest.csv")["quantity"])


HANG = '''
import signal, subprocess, time
from pathlib import Path


def track_c_hang():  # the alarm cannot stop it, as in C code; nor the child it started
    Path("PIDS").write_text(str(subprocess.Popen(["sleep", "1000"]).pid))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(100)
track_c_hang.timeout = 1


class Slow:
    timeout = 1

    def time_sleep(self):
        time.sleep(100)


def track_value():
    return 3
'''


def running(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()  # a zombie has ended
    except FileNotFoundError:
        return False


def user_track(tmp_path, bench: str) -> list[str]:
    """`bench track` of the user part alone: one benchmark file, a project of one commit."""
    (tmp_path / "project").mkdir()
    git_repo(tmp_path / "project", 1)
    (tmp_path / "bench_x.py").write_text(bench)
    return ["track", "--repo", str(tmp_path / "project"), "--parts", "user", "--benchmarks",
            str(tmp_path / "bench_x.py"), "--out", str(tmp_path / "history"), "--quiet"]


@pytest.mark.slow  # waits out two timeouts and the runner's kill: `make test` runs it, test-fast does not
def test_a_benchmark_past_its_timeout_is_its_own_error_and_nothing_is_left_behind(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    gone = subprocess.Popen(["true"])
    gone.wait()
    # what a SIGKILL left (its owner gone), a command still running, an older version's folder
    killed, live, old = (temp / f"choco-track-tree-{gone.pid}-x", temp / f"choco-bisect-{os.getppid()}-x",
                         temp / "choco-track-x")
    for folder in (killed, live, old):
        folder.mkdir()
    assert bench_main(user_track(tmp_path, HANG.replace("PIDS", str(tmp_path / "child.pid")))) == 1
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "history").rglob("*Z.json")]
    assert record["errors"] == ["user: bench_x.track_c_hang: timed out after 1 s",
                                "user: bench_x.Slow.time_sleep: timed out after 1 s"]
    assert list(record["user"]["figures"]) == ["bench_x.track_value"]  # the one after them still ran
    assert not running(int((tmp_path / "child.pid").read_text()))
    assert sorted(temp.iterdir()) == sorted([live, old])


@pytest.mark.slow  # a `bench track` process, signalled
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_track_removes_its_folder_and_its_benchmarks(sig, tmp_path):
    temp, pid = tmp_path / "tmp", tmp_path / "runner.pid"
    temp.mkdir()
    argv = user_track(tmp_path, f"import os, pathlib, time\n\n\ndef track_long():\n"
                      f"    pathlib.Path({str(pid)!r}).write_text(str(os.getpid()))\n    time.sleep(100)\n")
    proc = subprocess.Popen([sys.executable, "-m", "bench", *argv], cwd=ROOT, env={**os.environ, "TMPDIR": str(temp)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (pid.exists() and pid.read_text()):  # the benchmark runs
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(sig)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + sig and "Traceback" not in err, err
    assert list(temp.iterdir()) == [] and not running(int(pid.read_text()))


def test_a_full_disk_is_one_line_and_no_record(tmp_path, monkeypatch, capsys):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    argv = user_track(tmp_path, "def track_one():\n    return 1\n")
    monkeypatch.setattr(os, "fsync", full)
    refused(bench_main, argv, capsys, "machine.json: No space left on device")
    assert [p for p in (tmp_path / "history").rglob("*") if p.is_file()] == []
