"""The regression gate cannot be fooled (issue 26): `analysis history` refuses or fails a newest commit that
failed or holds no usable values, compares records only with records of the same settings, orders commits
by the repository's graph and not by clocks, skips malformed records with their reason; `bench track`
marks a record dirty when the tracker's tree (or any tracked file) is modified and never lets a --commits
value reach git as an option."""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from analysis.history import read_output
from analysis.cli import main as analysis_main
from bench import track
from bench.cli import main as bench_main
from bench.errors import BenchError
from bench.track.bisection import commit_range

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
CELL = "choco-sign_ring8"
SIZES = {"round_d": 10000, "repeats": 2}


def sha(i: int) -> str:
    return hashlib.sha1(f"gate{i}".encode()).hexdigest()


def record(commit: str, date: datetime, acc=(0.60, 0.61, 0.59), epochs=(4.0, 4.5, 5.0), perf=None, target=0.5,
           errors=(), status=("completed",) * 3, dirty=False) -> dict:
    """A record as bench track writes it: the study's one cell (3 seeds) and, when given, perf figures."""
    rec = {"kind": "choco-track", "version": 1, "commit": commit, "describe": commit[:7], "subject": "s",
           "commit_date": date.isoformat(), "dirty": dirty, "started": (START + timedelta(days=9)).isoformat(),
           "machine": {"id": "cpu-2c-gate", "cores": 2, "device": "cpu"}, "parts": ["study"], "errors": list(errors),
           "study": {"name": "track", "config_digest": "16e1a9797ff1", "target_acc": target, "seeds": [0, 1, 2],
                     "cells": {CELL: {"seeds": [0, 1, 2], "status": list(status), "final_test_acc": list(acc),
                                      "epochs_to_target": list(epochs),
                                      "bits_to_target": [None if e is None else e * 1e6 for e in epochs],
                                      "time_to_target_s": [None if e is None else e * 2 for e in epochs]}}}}
    if perf is not None:
        rec["parts"] = ["perf", "study"]
        rec["perf"] = {"command": "bench perf --quick", "sizes": SIZES, "figures": {
            name: {"values": values, "unit": "x", "kind": "ratio", "higher_is_better": False}
            for name, values in perf.items()}}
    return rec


def write(root: Path, rec: dict, name: str = "20260110T000000Z") -> Path:
    folder = root / rec["machine"]["id"] / rec["commit"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(rec))  # json writes NaN as NaN, as bench track would
    return path


def flat_history(root: Path, n: int = 5, perf: bool = True) -> None:
    """n commits, one an hour, of the same code: identical study numbers, perf ratios about 1."""
    for i in range(n):
        write(root, record(sha(i), START + timedelta(hours=i),
                           perf={"b.round_vs_copy_sign": [1.0, 1.02], "c.overhead": [2.0, 2.04]} if perf else None))


def history(root: Path, *args) -> int:
    return analysis_main(["history", str(root), "--no-figures", *map(str, args)])


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# -- the newest commit must have been measured: failures (exit 1) and refusals (exit 2) ---------------------
def test_a_newest_commit_whose_runs_all_failed_fails(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root)
    write(root, record(sha(5), START + timedelta(hours=5), acc=[None] * 3, epochs=[None] * 3, status=["failed"] * 3,
                       perf={"b.round_vs_copy_sign": [1.0, 1.01], "c.overhead": [2.0, 2.01]},
                       errors=[f"study: {CELL}_s{s}: bench run exited 1: boom" for s in range(3)]))
    assert history(root, "--out", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "3 failed parts or runs, e.g. study: choco-sign_ring8_s0: bench run exited 1: boom" in err
    assert f"study.{CELL}: seeds 0, 1, 2 failed or have no value" in err
    assert "**Failed** (2; exit status 1)" in (tmp_path / "out" / "history.md").read_text()


def test_a_failed_seed_without_an_error_line_fails_too(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root, perf=False)
    write(root, record(sha(5), START + timedelta(hours=5), acc=[0.6, None, 0.6], epochs=[4.0, None, 5.0],
                       status=["completed", "failed", "completed"]))
    assert history(root, "--out", tmp_path / "out") == 1
    assert f"study.{CELL}: seed 1 failed or has no value" in capsys.readouterr().err


def test_nan_figures_of_the_newest_commit_do_not_pass_expect(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root)
    nan = {"b.round_vs_copy_sign": [math.nan, math.nan], "c.overhead": [math.nan, math.nan]}
    write(root, record(sha(5), START + timedelta(hours=5), perf=nan))
    assert history(root, "--out", tmp_path / "out", "--expect", sha(5)) == 2  # nothing usable of it: refused
    err = one_line(capsys)
    assert f"--expect {sha(5)}: the 1 records of {sha(5)[:12]} are unusable" in err and "not a finite number" in err
    assert not (tmp_path / "out").exists()  # a refusal writes nothing
    # beside a usable record of the same commit, the NaN one is a failure
    write(root, record(sha(5), START + timedelta(hours=5), perf={"b.round_vs_copy_sign": [1.0, 1.01],
                                                                 "c.overhead": [2.0, 2.02]}), name="second")
    assert history(root, "--out", tmp_path / "out", "--expect", sha(5)) == 1
    assert "a record of the newest commit (or a later one) is unusable" in capsys.readouterr().err


def test_nan_figures_of_a_later_commit_than_the_newest_usable_one_fail(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root)
    write(root, record(sha(5), START + timedelta(hours=5), perf={"b.round_vs_copy_sign": [math.nan, 1.0],
                                                                 "c.overhead": [2.0, 2.0]}))
    assert history(root, "--out", tmp_path / "out") == 1  # by committer date: no repository holds these commits
    assert "a record of the newest commit (or a later one) is unusable" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["", " ", "-x", "--output=/tmp/x"])
def test_an_empty_or_option_expect_is_refused(tmp_path, capsys, value):
    root = tmp_path / "h"
    flat_history(root)
    assert history(root, "--out", tmp_path / "out", f"--expect={value}") == 2
    assert f"--expect {value!r}: empty or an option" in one_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_figure_missing_at_the_newest_commit_fails(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root)
    write(root, record(sha(5), START + timedelta(hours=5), perf={"b.round_vs_copy_sign": [1.0, 1.01]}))
    assert history(root, "--out", tmp_path / "out", "--expect", sha(5)) == 1
    assert "perf.c.overhead: measured at the commit before" in capsys.readouterr().err
    # a group bench perf was not asked for is not missing, nor a cell that did not run
    rec = record(sha(6), START + timedelta(hours=6), perf={"b.round_vs_copy_sign": [1.0, 1.01]})
    rec["perf"]["command"] = "bench perf --quick --only b"
    rec["study"]["cells"] = {}
    write(root, rec)
    assert history(root, "--out", tmp_path / "out") == 0


def test_a_figure_of_another_machine_is_not_missing(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root)
    gpu = record(sha(5), START + timedelta(hours=5), perf={"b.round_vs_copy_sign": [1.0, 1.01],
                                                           "c.overhead": [2.0, 2.0], "e.cuda_only": [1.0, 1.0]})
    gpu["machine"] = {"id": "cuda-8c-gate", "cores": 8, "device": "cpu"}
    write(root, gpu)
    write(root, record(sha(6), START + timedelta(hours=6), perf={"b.round_vs_copy_sign": [1.0, 1.01],
                                                                 "c.overhead": [2.0, 2.0]}))
    assert history(root, "--out", tmp_path / "out") == 0  # the commit before on this machine had no e figures
    assert "FAILED" not in capsys.readouterr().err


def test_figures_left_out_for_load_are_not_missing(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root)
    busy = record(sha(5), START + timedelta(hours=5), perf={"b.round_vs_copy_sign": [1.0, 1.01],
                                                            "c.overhead": [2.0, 2.02]})
    busy["perf"]["load_average_1m"] = {"start": 10.0}
    write(root, busy)
    assert history(root, "--out", tmp_path / "out", "--max-load", "1") == 0
    newest = read_output(tmp_path / "out" / "newest.csv").set_index("quantity")
    assert newest.loc["perf.c.overhead", "verdict"] == "not measured" and "FAILED" not in capsys.readouterr().err


def test_expect_refuses_a_commit_compared_with_nothing(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root)
    rec = record(sha(5), START + timedelta(hours=5), perf={"b.round_vs_copy_sign": [1.0, 1.01],
                                                           "c.overhead": [2.0, 2.0]})
    rec["perf"]["sizes"] = {"round_d": 99}  # other sizes: nothing earlier to compare with
    del rec["study"]
    write(root, rec)
    assert history(root, "--out", tmp_path / "out", "--expect", sha(5), "--kinds", "ratio") == 2
    assert "none of the newest commit's 2 quantities has an earlier commit of the same settings" in one_line(capsys)
    assert history(root, "--out", tmp_path / "out", "--kinds", "ratio") == 0  # without --expect: first commits


# -- records are compared only with records of the same settings ---------------------------------------------
def test_records_of_another_target_are_a_group_of_their_own(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root, perf=False)
    # the same code read at a target of 60 %: later to reach it, the same final accuracy
    write(root, record(sha(5), START + timedelta(hours=5), epochs=(7.0, 7.5, 8.0), target=0.6))
    assert history(root, "--out", tmp_path / "out") == 0
    newest = read_output(tmp_path / "out" / "newest.csv").set_index("quantity")
    assert newest.loc[f"study.{CELL}.epochs_to_target[target 0.6]", "verdict"] == "first commit"
    assert newest.loc[f"study.{CELL}.epochs_to_target[target 0.5]", "verdict"] == "not measured"
    assert newest.loc[f"study.{CELL}.final_test_acc", "verdict"] == "within tolerance"  # the target is no setting of it
    assert "3 quantities were measured with different settings" in capsys.readouterr().err


def test_perf_figures_of_other_sizes_or_device_are_not_compared(tmp_path):
    root = tmp_path / "h"
    flat_history(root)
    rec = record(sha(5), START + timedelta(hours=5), perf={"b.round_vs_copy_sign": [3.0, 3.1], "c.overhead": [9.0, 9]})
    rec["machine"] = {"id": "cuda-16c-gate", "cores": 16, "device": "cuda: H200"}
    write(root, rec)
    assert history(root, "--out", tmp_path / "out", "--kinds", "ratio") == 0
    quantities = set(read_output(tmp_path / "out" / "newest.csv")["quantity"])
    assert "perf.b.round_vs_copy_sign[device cuda: H200]" in quantities


def test_records_without_settings_are_their_own_group_said_once(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root, perf=False)
    old = record(sha(7), START - timedelta(hours=1), epochs=(9.0, 9.0, 9.0))
    del old["study"]["target_acc"], old["study"]["config_digest"]
    write(root, old)
    assert history(root, "--out", tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert err.count("do not store their settings") == 1 and "'settings not recorded'" in err
    table = read_output(tmp_path / "out" / "history.csv")
    assert f"study.{CELL}.epochs_to_target[settings not recorded]" in set(table["quantity"])


# -- commit order comes from the repository's graph, not from clocks ------------------------------------------
def git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True, env={**os.environ, **(env or {})}).stdout.strip()


def skewed_repo(tmp_path: Path, n: int = 6) -> list[str]:
    """n commits; the newest made on a machine whose clock is a year behind."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commits = []
    for i in range(n):
        when = (START + timedelta(hours=i) if i < n - 1 else START - timedelta(days=365)).isoformat()
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}", env={"GIT_COMMITTER_DATE": when,
                                                                     "GIT_AUTHOR_DATE": when})
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits


def test_a_skewed_clock_does_not_hide_a_regression(tmp_path, capsys):
    commits = skewed_repo(tmp_path)
    root = tmp_path / "h"
    for i, commit in enumerate(commits):
        date = datetime.fromisoformat(git(tmp_path / "repo", "show", "-s", "--format=%cI", commit))
        write(root, record(commit, date, acc=(0.50, 0.51, 0.49) if i == len(commits) - 1 else (0.60, 0.61, 0.59)))
    assert history(root, "--out", tmp_path / "out", "--repo", tmp_path / "repo") == 1
    newest = read_output(tmp_path / "out" / "newest.csv").set_index("quantity")
    assert newest.loc[f"study.{CELL}.final_test_acc", "commit"] == commits[-1][:12]
    assert f"REGRESSION study.{CELL}.final_test_acc" in capsys.readouterr().err
    assert history(root, "--out", tmp_path / "out", "--repo", tmp_path / "repo", "--expect", commits[-1]) == 1
    # by the clocks, the newest commit would come first: chosen, the order says so
    assert history(root, "--out", tmp_path / "out", "--order", "date") == 0


def test_without_a_repository_the_order_falls_back_to_dates_and_says_so(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root, n=3, perf=False)
    assert history(root, "--out", tmp_path / "out", "--repo", tmp_path / "nowhere") == 0
    assert "is not a git checkout (or git cannot run): commits are in committer-date order" in capsys.readouterr().err


def test_commits_the_repository_does_not_hold_are_never_the_newest(tmp_path, capsys):
    commits = skewed_repo(tmp_path, n=4)
    root = tmp_path / "h"
    for commit in commits:
        write(root, record(commit, START))
    write(root, record(sha(1), START + timedelta(days=400), acc=(0.1, 0.1, 0.1)))  # unknown, "newer" by its date
    assert history(root, "--out", tmp_path / "out", "--repo", tmp_path / "repo", "--expect", commits[-1]) == 0
    assert "1 commits are not in the repository" in capsys.readouterr().err


def test_a_record_outside_its_commits_folder_is_left_out(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root, perf=False)
    folder = root / "cpu-2c-gate" / sha(4)
    (folder / "copied.json").write_text(json.dumps(record(sha(0), START, acc=(0.1, 0.1, 0.1))))
    assert history(root, "--out", tmp_path / "out") == 1  # in the newest commit's folder: a failure
    assert f"copied.json: its commit {sha(0)[:12]} is not that of its folder {sha(4)[:12]}" in capsys.readouterr().err


def test_two_commits_sharing_a_point_are_refused(tmp_path, capsys):
    root = tmp_path / "h"
    flat_history(root, perf=False)
    write(root, record(sha(4)[:12] + "0" * 28, START + timedelta(hours=9)))
    assert history(root, "--out", tmp_path / "out") == 2
    assert f"share the point {sha(4)[:12]}" in one_line(capsys)


# -- malformed records are skipped with their reason, never a traceback ---------------------------------------
def _perf(value):
    def change(rec):
        rec["perf"] = value
    return change


def _figure(fig):
    def change(rec):
        rec["perf"] = {"figures": {"b.round_vs_copy_sign": fig}}
    return change


def _set(key, value):
    def change(rec):
        rec[key] = value
    return change


def _drop_seeds(rec):
    del rec["study"]["cells"][CELL]["seeds"]


@pytest.mark.parametrize("change, reason", [
    (_perf([1, 2]), "perf is list, not an object"),
    (_perf("fast"), "perf is str, not an object"),
    (_perf({"figures": [1.0]}), "perf.figures is list, not an object"),
    (_figure({"values": [], "unit": "x"}), "perf figure 'b.round_vs_copy_sign' has no values"),
    (_figure({"unit": "x"}), "perf figure 'b.round_vs_copy_sign': value None is not a finite number"),
    (_figure({"values": [1.0, math.nan]}), "value nan is not a finite number"),
    (_figure({"values": [10 ** 400]}), "is not a finite number"),
    (_figure({"median": math.inf}), "value inf is not a finite number"),
    (_drop_seeds, f"study cell '{CELL}' has no list of seeds"),
    (_set("errors", "boom"), "errors is str, not a list"),
    (_set("machine", "cpu"), "machine has no id"),
    (_set("commit", None), "commit is None"),
])
def test_malformed_records_are_left_out_with_their_reason(tmp_path, capsys, change, reason):
    root = tmp_path / "h"
    flat_history(root)
    bad = record(sha(1), START + timedelta(hours=1), perf={"b.round_vs_copy_sign": [1.0]})
    change(bad)
    folder = root / "cpu-2c-gate" / sha(1)
    (folder / "bad.json").write_text(json.dumps(bad))
    assert history(root, "--out", tmp_path / "out") == 0  # an older commit's: noted, the rest compared
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (note,) = [line for line in err.splitlines() if "bad.json" in line]
    assert reason in note and note.endswith("(left out)")


@pytest.mark.parametrize("text", ["[1, 2]", "[" * 100000 + "]" * 100000, "\xff\xfe", '{"kind": "choco-track"'])
def test_unreadable_json_is_left_out(tmp_path, capsys, text):
    root = tmp_path / "h"
    flat_history(root, n=3)
    (root / "cpu-2c-gate" / sha(0) / "bad.json").write_bytes(text.encode("latin-1"))
    assert history(root, "--out", tmp_path / "out") == 0
    err = capsys.readouterr().err
    assert "bad.json" in err and "Traceback" not in err


def test_measured_reads_a_folder_of_odd_json_without_a_traceback(tmp_path):
    (tmp_path / "a.json").write_text("[1, 2]")
    (tmp_path / "b.json").write_text("[" * 100000)
    assert track.measured(tmp_path) is False
    (tmp_path / "c.json").write_text(json.dumps({"kind": "choco-track", "dirty": False, "errors": []}))
    assert track.measured(tmp_path) is True


# -- bench track: dirty means any change to what computes the numbers -----------------------------------------
@pytest.fixture
def checkout(tmp_path) -> Path:
    repo = tmp_path / "repo"
    for path in ("bench/__init__.py", "bench/track/quickset.py", "analysis/summary.py", "Makefile"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo


@pytest.fixture
def fake_perf(monkeypatch):
    def run_perf(repo, work, device, only, say):
        return {"wall_s": 1.0, "figures": {"b.x": {"values": [1.0, 1.1], "kind": "ratio"}}}, []
    monkeypatch.setattr(track.quickset, "run_perf", run_perf)


def test_a_modified_tracker_makes_the_record_dirty(tmp_path, checkout, fake_perf, monkeypatch):
    tracker = tmp_path / "tracker"
    subprocess.run(["git", "clone", "-q", str(checkout), str(tracker)], check=True)
    monkeypatch.setattr(track.record, "ROOT", tracker)  # the checkout that runs bench track
    def tracked(out: Path) -> dict:
        assert bench_main(["track", "--repo", str(checkout), "--out", str(out), "--parts", "perf", "--quiet"]) == 0
        (path,) = out.rglob("2*.json")
        return json.loads(path.read_text())
    assert tracked(tmp_path / "before")["dirty"] is False
    (tracker / "bench" / "track" / "quickset.py").write_text("x = 2  # the tracker's code, changed\n")
    dirty = tracked(tmp_path / "after")
    assert dirty["dirty"] is True and dirty["dirty_files"] == ["tracker: bench/track/quickset.py"]
    assert dirty["tracker"] == {"commit": git(tracker, "rev-parse", "HEAD"), "same_checkout": False, "dirty": True,
                                "dirty_files": ["bench/track/quickset.py"]}
    assert dirty["describe"].endswith("-dirty")


@pytest.mark.parametrize("change, expected", [
    (lambda repo: (repo / "Makefile").write_text("changed\n"), ["Makefile"]),
    (lambda repo: (repo / "analysis" / "summary.py").unlink(), ["analysis/summary.py"]),
    (lambda repo: (repo / "sitecustomize.py").write_text("import os\n"), ["sitecustomize.py"]),
    (lambda repo: (repo / "analysis" / "new.txt").write_text("a\n"), ["analysis/new.txt"]),
    (lambda repo: (git(repo, "update-index", "--assume-unchanged", "bench/__init__.py"),
                   (repo / "bench" / "__init__.py").write_text("x = 3\n")),
     ["bench/__init__.py (not checked by git)"]),
])
def test_any_change_to_a_tracked_file_or_importable_code_is_dirty(checkout, change, expected):
    change(checkout)
    info = track.commit_info(checkout)
    assert info["dirty"] is True and sorted(info["dirty_files"]) == sorted(expected)


def test_untracked_files_that_are_not_code_leave_the_tree_clean(checkout):
    (checkout / "notes.txt").write_text("n\n")
    (checkout / "results").mkdir()
    (checkout / "results" / "r.json").write_text("{}\n")
    assert track.commit_info(checkout)["dirty"] is False


# -- user values never become options to git ------------------------------------------------------------------
@pytest.mark.parametrize("value", ["--output={victim}", "--output=/tmp/../{victim}", "HEAD,--output={victim}",
                                   "HEAD..--output={victim}", "-n1..HEAD", ""])
def test_a_commits_value_that_git_would_read_as_an_option_is_refused(tmp_path, checkout, capsys, value):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    value = value.format(victim=str(victim).lstrip("/") if "/tmp/../" in value else victim)
    status = bench_main(["track", "--repo", str(checkout), "--out", str(tmp_path / "history"), "--parts", "perf",
                         f"--commits={value}"])
    assert victim.read_text() == "keep me\n" and not (tmp_path / "history").exists()
    assert status == 2
    err = one_line(capsys)
    assert "may not be empty or start with '-'" in err and err.startswith("bench: error: --commits")


def test_git_gets_end_of_options_even_when_the_check_is_bypassed(tmp_path, checkout, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    monkeypatch.setattr(track.commits, "check_commits", lambda spec: None)
    for spec in (f"--output={victim}..HEAD", f"--output={victim}"):
        with pytest.raises(BenchError):
            track.commit_list(checkout, spec)
    assert victim.read_text() == "keep me\n"


def test_bisect_refuses_a_revision_that_starts_with_a_dash(tmp_path, checkout):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    with pytest.raises(BenchError, match="may not be empty or start with '-'"):
        commit_range(str(checkout), f"--output={victim}", "HEAD")
    assert victim.read_text() == "keep me\n"
