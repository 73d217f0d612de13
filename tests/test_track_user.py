"""Tracking one's own code over commits: bench track --benchmarks runs asv-style benchmark files (time_*,
track_*) in each commit of any git project, and analysis history finds the commit that changed a number."""
from __future__ import annotations

import json

from analysis.cli import main as analysis_main
from analysis.history import read_output
from bench.cli import main as bench_main
from bench import track as track_package
from bench.track import benchfile
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
    monkeypatch.syspath_prepend(str(tmp_path))
    result = benchfile.run([str(tmp_path / "bench_mine.py"), str(tmp_path / "bench_empty.py")])
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
