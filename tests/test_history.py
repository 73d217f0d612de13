"""analysis history and bench bisect on synthetic histories: planted steps are found at their commit, flat
noise is not, the newest commit's regression is exit status 1, bisect names the commit that introduced a step."""
from __future__ import annotations

import hashlib
import json
import math
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import history
from bench.cli import main as bench_main
from bench.track.bisection import BisectError, bisect, parse_metric
from analysis.cli import main as analysis_main
from analysis.history.metric import judge, metric_values

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


def make_record(i: int, perf: dict[str, list[float]] | None = None, study: dict[str, dict[str, list]] | None = None,
                machine: str = "cpu-2c-test", dirty: bool = False, started: int = 0, kinds: dict | None = None) -> dict:
    """A record of commit i (committed i hours after START): perf figures name -> values (ratio unless
    ``kinds`` says otherwise), study cells -> field -> per-seed values."""
    kinds = kinds or {}
    rec = {"kind": "choco-track", "version": 1, "commit": sha(i), "describe": f"c{i:02d}", "subject": f"commit {i}",
           "commit_date": (START + timedelta(hours=i)).isoformat(), "dirty": dirty,
           "started": (START + timedelta(days=30, minutes=started)).isoformat(),
           "machine": {"id": machine, "cpu": "test", "cores": 2}, "errors": []}
    if perf is not None:
        rec["perf"] = {"figures": {name: {"values": list(values), "median": float(np.median(values)), "unit": "x",
                                          "kind": kinds.get(name, "ratio"), "higher_is_better": False}
                                   for name, values in perf.items()}}
    if study is not None:
        rec["study"] = {"cells": {cell: {"seeds": list(range(len(next(iter(fields.values()))))), **fields}
                                  for cell, fields in study.items()}}
    return rec


def write(root: Path, rec: dict, name: str = "20260101T000000Z") -> Path:
    folder = root / rec["machine"]["id"] / rec["commit"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    while path.exists():
        path = folder / f"{path.stem}-x.json"
    path.write_text(json.dumps(rec))
    return path


def accuracy_history(root: Path, n: int, step_at: int | None, drop: float, newest_drop: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    for i in range(n):
        level = 0.60 - (drop if step_at is not None and i >= step_at else 0.0) - (newest_drop if i == n - 1 else 0.0)
        acc = list(np.round(level + rng.normal(0, 0.005, 3), 4))
        write(root, make_record(i, study={"choco-sign_ring8": {"final_test_acc": acc, "epochs_to_target": [4, 4.5, 5],
                                                               "bits_to_target": [1e6, 1.1e6, 1.2e6],
                                                               "time_to_target_s": [1.0, 1.1, 1.2]}}))


def run_history(*args) -> int:
    return analysis_main(["history", *map(str, args)])


def test_a_planted_step_is_found_at_its_commit_with_a_small_p(tmp_path, capsys):
    root = tmp_path / "history"
    accuracy_history(root, 12, step_at=7, drop=0.05)
    assert run_history(root / "cpu-2c-test", "--out", tmp_path / "out", "--no-figures") == 0  # newest is no new step
    steps = history.read_output(tmp_path / "out" / "steps.csv")
    acc = steps[steps["quantity"] == "study.choco-sign_ring8.final_test_acc"]
    assert len(acc) == 1
    step = acc.iloc[0]
    assert step["first_commit"] == sha(7)[:12] and step["previous_commit"] == sha(6)[:12]
    assert step["p_adj"] < 0.05 and step["verdict"] == "regression"
    assert step["change"] == pytest.approx(-0.05, abs=0.01)
    # the constant quantities have no step
    assert set(steps["quantity"]) == {"study.choco-sign_ring8.final_test_acc"}
    out = capsys.readouterr().out
    assert "steps (1)" in out and sha(7)[:12] in out


def test_a_commit_of_digits_only_stays_its_hash_in_the_tables_read_back(tmp_path):
    # 12-character hashes of decimal digits only (about one in 280) read as integers with pd.read_csv's
    # default, the leading zeros lost; read_output keeps every commit column as text
    root = tmp_path / "history"
    rng = np.random.default_rng(3)
    commit = lambda i: f"{i:012d}" + "1" * 28  # noqa: E731
    for i in range(12):
        rec = make_record(i, study={"choco-sign_ring8": {"final_test_acc": list(np.round(
            (0.60 if i < 7 else 0.55) + rng.normal(0, 0.005, 3), 4))}})
        write(root, {**rec, "commit": commit(i), "describe": commit(i)[:7]})
    assert run_history(root / "cpu-2c-test", "--out", tmp_path / "out", "--no-figures", "--order", "date") == 0
    assert pd.read_csv(tmp_path / "out" / "steps.csv")["first_commit"].iloc[0] == 7  # what the default does
    step = history.read_output(tmp_path / "out" / "steps.csv").iloc[0]
    assert (step["first_commit"], step["previous_commit"], step["describe"]) == (commit(7)[:12], commit(6)[:12],
                                                                                 "0000000")
    newest = history.read_output(tmp_path / "out" / "newest.csv")
    assert set(newest["commit"]) == {commit(11)[:12]}
    table = history.read_output(tmp_path / "out" / "history.csv")
    assert set(table["commit"]) == {commit(i) for i in range(12)} and set(table["point"]) == {commit(i)[:12]
                                                                                            for i in range(12)}


def test_two_steps_are_both_found():
    values = [np.full(3, 1.0) + 0.01 * np.arange(3)] * 5 + [np.full(3, 2.0) + 0.01 * np.arange(3)] * 5 \
        + [np.full(3, 3.0) + 0.01 * np.arange(3)] * 5
    steps = history.find_steps(values, alpha=0.05, min_side=3)
    assert [s["index"] for s in steps] == [5, 10]


def test_flat_noise_gives_few_false_steps():
    # 40 flat series of 12 commits x 3 noisy values: Bonferroni over the splits keeps false steps rare
    false = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        values = [rng.normal(1.0, 0.1, 3) for _ in range(12)]
        false += bool(history.find_steps(values, alpha=0.05, min_side=3))
    assert false <= 3  # the level is 0.05 per series; Bonferroni makes it conservative


def test_a_series_too_short_for_min_side_has_no_step():
    values = [np.array([1.0, 1.1])] * 2 + [np.array([5.0, 5.1])] * 2
    assert history.find_steps(values, min_side=3) == []


def test_newest_commit_regression_is_exit_1(tmp_path, capsys):
    root = tmp_path / "history"
    accuracy_history(root, 8, step_at=None, drop=0, newest_drop=0.06)
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 1
    newest = history.read_output(tmp_path / "out" / "newest.csv").set_index("quantity")
    row = newest.loc["study.choco-sign_ring8.final_test_acc"]
    assert row["verdict"] == "regression" and row["commit"] == sha(7)[:12] and row["p"] <= 0.05
    err = capsys.readouterr().err
    assert "REGRESSION study.choco-sign_ring8.final_test_acc" in err


def test_newest_commit_improvement_is_exit_0(tmp_path):
    root = tmp_path / "history"
    accuracy_history(root, 8, step_at=None, drop=0, newest_drop=-0.06)
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 0
    newest = history.read_output(tmp_path / "out" / "newest.csv").set_index("quantity")
    assert newest.loc["study.choco-sign_ring8.final_test_acc", "verdict"] == "improvement"


def test_a_small_change_within_tolerance_is_exit_0(tmp_path):
    root = tmp_path / "history"
    accuracy_history(root, 8, step_at=None, drop=0, newest_drop=0.01)  # 1 point < 2 points
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 0


def test_a_wider_tolerance_on_the_command_line_is_used(tmp_path):
    root = tmp_path / "history"
    accuracy_history(root, 8, step_at=None, drop=0, newest_drop=0.06)
    assert run_history(root, "--out", tmp_path / "out", "--no-figures", "--tol", "accuracy=0.1") == 0


def test_perf_ratio_regression_and_repeats_of_a_commit_are_pooled(tmp_path):
    root = tmp_path / "history"
    rng = np.random.default_rng(1)
    for i in range(6):
        level = 2.0 if i == 5 else 1.0  # the newest commit doubles a lower-is-better ratio
        for repeat in range(2):  # two records per commit: repeats
            write(root, make_record(i, perf={"b.round_vs_copy_sign": list(level + rng.normal(0, 0.02, 2))},
                                    started=repeat), name=f"2026010{repeat}T000000Z")
    assert run_history(root, "--out", tmp_path / "out") == 1
    newest = history.read_output(tmp_path / "out" / "newest.csv").set_index("quantity").loc["perf.b.round_vs_copy_sign"]
    assert newest["verdict"] == "regression" and newest["change"] == pytest.approx(1.0, abs=0.1)
    table = history.read_output(tmp_path / "out" / "history.csv")
    assert (table[table["point"] == sha(5)[:12]]["value"].size) == 4  # 2 records x 2 repeats
    assert (tmp_path / "out" / "figures" / "perf.b.round_vs_copy_sign.png").stat().st_size > 1000
    assert "Newest commit" in (tmp_path / "out" / "history.md").read_text()


def test_too_few_values_for_the_test_fall_back_to_the_tolerance(tmp_path):
    root = tmp_path / "history"
    write(root, make_record(0, perf={"c.overhead": [1.0, 1.02]}))
    write(root, make_record(1, perf={"c.overhead": [1.5, 1.52]}))  # 2 vs 2 values: smallest p 1/6
    assert run_history(root, "--out", tmp_path / "out", "--no-figures", "--confirm", "1") == 1
    row = history.read_output(tmp_path / "out" / "newest.csv").iloc[0]
    assert row["verdict"] == "regression" and row["test"].startswith("tolerance only")


def test_ratios_are_pooled_across_machines_absolute_times_are_not(tmp_path):
    root = tmp_path / "history"
    for i in range(5):
        for machine, scale in (("cpu-2c-aaaa", 1.0), ("cuda-8c-bbbb", 10.0)):
            write(root, make_record(i, machine=machine, perf={"b.round_vs_copy_sign": [1.0, 1.01],
                                                               "b.round_seconds_sign": [0.1 * scale, 0.1 * scale]},
                                    kinds={"b.round_seconds_sign": "absolute"}))
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 0
    quantities = set(history.read_output(tmp_path / "out" / "history.csv")["quantity"])
    assert quantities == {"perf.b.round_vs_copy_sign", "perf.b.round_seconds_sign@cpu-2c-aaaa",
                          "perf.b.round_seconds_sign@cuda-8c-bbbb"}
    # the newest commit's absolute times (10x apart between machines) are no regression: never compared
    newest = history.read_output(tmp_path / "out" / "newest.csv")
    assert set(newest["verdict"]) == {"within tolerance"}


def test_a_dirty_tree_is_its_own_point_after_its_commit(tmp_path):
    root = tmp_path / "history"
    accuracy_history(root, 4, step_at=None, drop=0)
    write(root, make_record(3, dirty=True, study={"choco-sign_ring8": {"final_test_acc": [0.5, 0.5, 0.5]}}),
          name="dirty")
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 1  # the dirty tree lost 10 points
    newest = history.read_output(tmp_path / "out" / "newest.csv").set_index("quantity")
    assert newest.loc["study.choco-sign_ring8.final_test_acc", "commit"] == sha(3)[:12] + "+dirty"
    assert run_history(root, "--out", tmp_path / "out2", "--no-figures", "--clean-only") == 0


def test_default_out_is_beside_the_history(tmp_path):
    root = tmp_path / "history"
    accuracy_history(root, 3, step_at=None, drop=0)
    assert run_history(root / "cpu-2c-test", "--no-figures") == 0
    assert (root / "cpu-2c-test.report" / "steps.csv").is_file()
    assert run_history(root, "--no-figures") == 0  # the report folder beside a machine's is not read as records


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/history"], "history directory not found"),
    (["{empty}"], "no bench track records"),
    (["{hist}", "--tol", "speed=0.1"], "KIND=VALUE"),
    (["{hist}", "--tol", "ratio=-1"], "finite and > 0"),
    (["{hist}", "--kinds", "ratio,bogus"], "--kinds"),
    (["{hist}", "--alpha", "2"], "--alpha"),
    (["{hist}", "--only", "nothing.*"], "no tracked values left"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "junk.json").write_text("{not json")
    root = tmp_path / "hist"
    accuracy_history(root, 3, step_at=None, drop=0)
    args = [a.format(empty=tmp_path / "empty", hist=root) for a in args]
    assert run_history(*args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and err.startswith("analysis history: error:")


def test_unreadable_records_are_left_out_with_a_note(tmp_path, capsys):
    root = tmp_path / "history"
    accuracy_history(root, 3, step_at=None, drop=0)
    (root / "cpu-2c-test" / sha(0) / "broken.json").write_text(json.dumps({"kind": "choco-track", "commit": "zz"}))
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 0
    assert "broken.json: commit is 'zz'" in capsys.readouterr().err


def test_order_by_git(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commits = []
    for i in range(3):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{i}"], check=True)
        commits.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip())
    root = tmp_path / "history"
    for i, commit in enumerate(commits):  # committer dates in the opposite order of the git history
        rec = make_record(10 - i, study={"c": {"final_test_acc": [0.6, 0.6, 0.6]}})
        rec["commit"] = commit
        write(root, rec)
    assert run_history(root, "--out", tmp_path / "out", "--no-figures", "--order", "git", "--repo", repo) == 0
    table = history.read_output(tmp_path / "out" / "history.csv")
    order = table.drop_duplicates("point").sort_values("order")["commit"].tolist()
    assert order == commits


# -- bisect -------------------------------------------------------------------------------------------------
def fake_judge(values_of: dict[str, list[float] | None], calls: list[str], higher_is_better: bool, tol: float,
               mode: str = "rel"):
    """A probe of bench bisect: the values planted at a commit, judged as analysis.history.metric judges them."""
    def judged(commit, reference):
        calls.append(commit)
        return judge(values_of[commit] or [], reference, higher_is_better, mode, tol)
    return judged


def test_bisect_names_the_commit_that_introduced_a_step():
    commits = [f"c{i:02d}" + "0" * 37 for i in range(17)]
    values = {c: ([1.0, 1.01, 0.99] if i < 11 else [1.5, 1.51, 1.49]) for i, c in enumerate(commits)}
    calls: list[str] = []
    result = bisect(commits, fake_judge(values, calls, higher_is_better=False, tol=0.15))
    assert result["first_bad"] == commits[11]
    assert len(calls) <= 2 + math.ceil(math.log2(15)) + 1  # GOOD, BAD, then a binary search


def test_bisect_skips_commits_that_cannot_be_measured():
    commits = [f"c{i}" for i in range(9)]
    values = {c: ([0.6] * 3 if i < 5 else [0.5] * 3) for i, c in enumerate(commits)}
    values["c5"] = None  # the first bad commit does not build: it and c6 are the candidates
    result = bisect(commits, fake_judge(values, [], higher_is_better=True, tol=0.02, mode="abs"))
    assert result["first_bad"] is None and result["candidates"] == ["c5", "c6"]
    values["c5"] = [0.5] * 3
    values["c4"] = None  # the last good commit cannot be measured: it may be the first bad one
    result = bisect(commits, fake_judge(values, [], higher_is_better=True, tol=0.02, mode="abs"))
    assert result["first_bad"] is None and result["candidates"] == ["c4", "c5"]
    values["c4"] = [0.6] * 3
    values["c2"] = values["c6"] = None  # skipped commits away from the step: the search goes round them
    result = bisect(commits, fake_judge(values, [], higher_is_better=True, tol=0.02, mode="abs"))
    assert result["first_bad"] == "c5"


def test_bisect_refuses_a_bad_that_is_not_worse():
    commits = ["g", "m", "b"]
    values = {"g": [1.0, 1.0], "m": [1.0, 1.0], "b": [1.05, 1.05]}  # 5 % < 15 %
    with pytest.raises(BisectError, match="not worse than GOOD"):
        bisect(commits, fake_judge(values, [], higher_is_better=False, tol=0.15))


def test_bisect_metric_names():
    assert parse_metric("perf.b.round_vs_copy_sign")["parts"] == ["--parts", "perf", "--perf-only", "b"]
    assert parse_metric("study.choco-sign_ring8.final_test_acc")["parts"] == ["--parts", "study", "--cells",
                                                                             "choco-sign_ring8"]
    with pytest.raises(BisectError):
        parse_metric("study.choco-sign_ring8.speed")


def test_metric_values_read_from_records(tmp_path):
    rec = make_record(0, perf={"b.round_vs_copy_sign": [1.0, 2.0]},
                      study={"cell": {"final_test_acc": [0.5, 0.6, 0.7]}})
    rec["_path"] = str(tmp_path / "r.json")
    values, meta = metric_values([rec, {**rec, "_path": "other"}], "study.cell.final_test_acc")
    assert values == [0.5, 0.6, 0.7] and meta["kind"] == "accuracy" and meta["higher_is_better"]
    values, meta = metric_values([rec], "perf.b.round_vs_copy_sign")
    assert values == [1.0, 2.0] and meta["kind"] == "ratio"


@pytest.mark.parametrize("args, message", [
    (["HEAD~1", "HEAD", "--metric", "speed"], "is not perf.<figure>"),
    (["nope", "HEAD", "--metric", "perf.b.round_vs_copy_sign"], "must be commits of this repository"),
    (["HEAD", "HEAD~1", "--metric", "perf.b.round_vs_copy_sign"], "is not an ancestor"),
    (["HEAD~1", "HEAD", "--metric", "perf.b.x", "--tol", "nan"], "--tol"),
])
def test_bisect_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(2):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", f"c{i}"], check=True)
    assert bench_main(["bisect", *args, "--repo", str(repo)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_bench_bisect_names_the_first_bad_commit_from_stored_records(tmp_path, capsys, monkeypatch):
    """The whole command on a real repository, every probe answered by the records already in --history
    (a measurement would fail the test: `bench track` is not run)."""
    from analysis.history import metric
    from bench.track import bisection

    repo, root = tmp_path / "repo", tmp_path / "history"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commits = []
    for i in range(9):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", f"c{i}"], check=True)
        commits.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                                      text=True, check=True).stdout.strip())
        values = [1.0, 1.01, 0.99] if i < 6 else [1.5, 1.51, 1.49]  # seconds: commit 6 made it 50 % slower
        write(root, {**make_record(i, perf={"b.x_seconds": values}), "commit": commits[-1]})

    def track(self, *args, cwd=None):
        assert "--print-machine" in args, args
        return "cpu-2c-test\n{}\n"

    monkeypatch.setattr(bisection.TrackProbe, "_track", track)
    argv = ["bisect", commits[0], commits[-1], "--metric", "perf.b.x_seconds", "--repo", str(repo),
            "--history", str(root)]
    assert bench_main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["first_bad"] == commits[6] and result["mode"] == "rel" and result["tolerance"] == 0.15
    assert set(result["probes"]) < set(commits) and len(result["probes"]) <= 2 + 3
    # the text form, with the judge in this process (its own process was exercised above: 1 s of imports a probe)
    monkeypatch.setattr(bisection.TrackProbe, "_judge", lambda self, path, reference, commit=None: metric.judged(
        [path], self.metric, commit, reference, self.tol))
    assert bench_main(argv) == 0
    assert f"first bad commit: {commits[6]} {commits[6][:7]}" in capsys.readouterr().out


def test_commits_of_the_same_second_are_ordered_by_their_place_on_the_chain(tmp_path):
    root = tmp_path / "history"
    for i, generation in enumerate([12, 10, 11]):
        rec = make_record(i, study={"c": {"final_test_acc": [0.6, 0.6, 0.6]}}, started=-i)
        rec["commit_date"], rec["generation"] = START.isoformat(), generation
        write(root, rec)
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 0
    table = history.read_output(tmp_path / "out" / "history.csv")
    assert table.drop_duplicates("point").sort_values("order")["commit"].tolist() == [sha(1), sha(2), sha(0)]


def test_a_regression_that_started_one_commit_earlier_is_not_the_newest_commits(tmp_path):
    # too recent for a step (fewer than --min-side commits after it): reported, not exit status 1
    root = tmp_path / "history"
    for i in range(6):
        acc = [0.6, 0.61, 0.59] if i < 4 else [0.5, 0.51, 0.49]
        write(root, make_record(i, study={"c": {"final_test_acc": acc}}))
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 0
    newest = history.read_output(tmp_path / "out" / "newest.csv").iloc[0]
    assert newest["verdict"] == "continues an earlier change"


def test_by_default_the_perf_figures_of_a_busy_machine_are_left_out(tmp_path, capsys):
    # records without the CPU measure (older bench track): the load average at bench perf's start decides
    root = tmp_path / "history"
    for i in range(4):
        rec = make_record(i, perf={"a.speedup_n4": [5.0, 5.1] if i < 3 else [0.05, 0.06]},
                          study={"c": {"final_test_acc": [0.6, 0.6, 0.6]}})
        rec["perf"]["figures"]["a.speedup_n4"]["higher_is_better"] = True
        rec["perf"]["load_average_1m"] = {"start": 10.0 if i == 3 else 0.5, "end": 11.0}
        write(root, rec)
    out = ["--out", tmp_path / "out", "--no-figures"]
    assert run_history(root, *out, "--keep-busy", "--confirm", "1") == 1  # 100x slower under load
    assert run_history(root, *out, "--max-load", "6", "--confirm", "1") == 1  # 5 per core is within 6
    capsys.readouterr()
    assert run_history(root, *out) == 0  # the default: 5 per core is above 1.5
    err = capsys.readouterr().err
    assert "perf figures of busy records left out: 1 whose bench perf started with a load average above 1.5" in err
    newest = history.read_output(tmp_path / "out" / "newest.csv").set_index("quantity")
    assert newest.loc["perf.a.speedup_n4", "verdict"] == "not measured"  # the study's numbers stay
    assert newest.loc["study.c.final_test_acc", "verdict"] == "within tolerance"


def busy_history(root: Path, shares: list, newest: list[float], load_start: float = 0.5):
    """Commits 0..3 of a perf figure (higher is better): 5.0 before, ``newest`` at commit 3; one record per
    share in ``shares`` at commit 3 (None: no CPU measure), each with that share of the CPU taken by others."""
    for i in range(3):
        rec = make_record(i, perf={"a.speedup_n4": [5.0, 5.1]})
        rec["perf"]["figures"]["a.speedup_n4"]["higher_is_better"] = True
        rec["perf"]["contention"] = {"method": "proc-stat", "others_cpu_share": 0.02}
        write(root, rec)
    for share in shares:
        rec = make_record(3, perf={"a.speedup_n4": newest})
        rec["perf"]["figures"]["a.speedup_n4"]["higher_is_better"] = True
        rec["perf"]["load_average_1m"] = {"start": load_start}
        if share is not None:
            rec["perf"]["contention"] = {"method": "proc-stat", "others_cpu_share": share}
        write(root, rec)


def test_the_measured_cpu_share_of_other_processes_decides_before_the_load_average(tmp_path, capsys):
    out = ["--out", tmp_path / "out", "--no-figures", "--confirm", "1"]
    busy_history(tmp_path / "a", [0.5], [1.0, 1.1])  # one other process spinning on 2 cores
    assert run_history(tmp_path / "a", *out) == 0
    assert "1 where other processes took more than 25% of the CPU while it was timed" in capsys.readouterr().err
    assert run_history(tmp_path / "a", *out, "--max-busy", "0.6") == 1
    # a quiet measure outweighs a high load average at the start (the 1-minute average lags by a minute)
    busy_history(tmp_path / "b", [0.05], [1.0, 1.1], load_start=10.0)
    assert run_history(tmp_path / "b", *out) == 1
    # the measure is read as a number or not at all: a damaged one falls back to the load average
    busy_history(tmp_path / "c", ["much"], [1.0, 1.1], load_start=10.0)
    assert run_history(tmp_path / "c", *out) == 0


def test_a_timing_regression_needs_two_records_of_the_commit_that_each_show_it(tmp_path, capsys):
    out = ["--out", tmp_path / "out", "--no-figures"]
    busy_history(tmp_path / "one", [0.0], [1.0, 1.1])
    capsys.readouterr()
    assert run_history(tmp_path / "one", *out) == 0  # one record, however bad: measure again
    err = capsys.readouterr().err
    assert "UNCONFIRMED perf.a.speedup_n4: 5.05 -> 1.05 (-79.2%) at c03, worse in 1 of 1 records where 2 are" in err
    row = history.read_output(tmp_path / "out" / "newest.csv").set_index("quantity").loc["perf.a.speedup_n4"]
    assert row["verdict"] == "unconfirmed" and row["records_worse"] == "1 of 1"
    assert "| unconfirmed |" in (tmp_path / "out" / "history.md").read_text()
    busy_history(tmp_path / "two", [0.0, 0.0], [1.0, 1.1])
    assert run_history(tmp_path / "two", *out) == 1  # measured twice, slow twice: a regression
    assert "REGRESSION perf.a.speedup_n4" in capsys.readouterr().err
    # a stray first record and a normal second one: the pooled median is still far off, but one record is not
    # a regression
    root = tmp_path / "stray"
    busy_history(root, [0.0], [1.0, 1.1])
    rec = make_record(3, perf={"a.speedup_n4": [3.0, 3.1]})  # -40 %: within a 50 % tolerance on its own
    rec["perf"]["figures"]["a.speedup_n4"]["higher_is_better"] = True
    write(root, rec)
    assert run_history(root, *out, "--tol", "ratio=0.5") == 0  # pooled: -59 %, all 4 values below the 6 before
    row = history.read_output(tmp_path / "out" / "newest.csv").set_index("quantity").loc["perf.a.speedup_n4"]
    assert row["verdict"] == "unconfirmed" and row["records_worse"] == "1 of 2"


def test_the_deterministic_study_needs_no_second_record(tmp_path):
    root = tmp_path / "history"
    for i in range(4):
        write(root, make_record(i, study={"c": {"final_test_acc": [0.6, 0.61, 0.6] if i < 3 else [0.5, 0.5, 0.5]}}))
    assert run_history(root, "--out", tmp_path / "out", "--no-figures") == 1
    row = history.read_output(tmp_path / "out" / "newest.csv").iloc[0]
    assert row["verdict"] == "regression"


@pytest.mark.parametrize("args, message", [
    (["--max-busy", "1.5"], "must be a share of the CPU, in [0, 1]"),
    (["--max-load", "-1"], "must be a finite load per core >= 0"),
    (["--confirm", "0"], "must be >= 1"),
    (["--confirm", "two"], "not a whole number"),
])
def test_bad_safeguard_values_are_one_line(tmp_path, capsys, args, message):
    busy_history(tmp_path / "h", [0.0], [1.0, 1.1])
    assert run_history(tmp_path / "h", "--out", tmp_path / "out", *args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_expect_refuses_a_check_that_measured_nothing_of_the_commit(tmp_path, capsys):
    root = tmp_path / "history"
    for i in range(3):
        rec = make_record(i, perf={"a.speedup_n4": [5.0, 5.1]})
        rec["perf"]["load_average_1m"] = {"start": 10.0 if i == 2 else 0.5, "end": 11.0}
        write(root, rec)
    write(root, make_record(3, perf={"a.speedup_n4": [5.0, 5.1]}, dirty=True))
    out = ["--out", tmp_path / "out", "--no-figures"]
    assert run_history(root, *out, "--expect", sha(2), "--clean-only", "--keep-busy") == 0  # the newest clean one
    assert run_history(root, *out, "--expect", sha(2), "--keep-busy") == 2  # a dirty tree of a later commit is newer
    cases = [(["--expect", sha(2), "--clean-only"], f"the records of {sha(2)[:12]} have no values left"),
             (["--expect", sha(3), "--clean-only"], f"no clean record of {sha(3)[:12]}"),
             (["--expect", sha(1)], f"{sha(1)[:12]} is not the newest commit read"),
             (["--expect", sha(9)], f"no record of {sha(9)[:12]}"),
             (["--expect", "no-such-rev", "--repo", tmp_path], "--expect no-such-rev: not a commit of")]
    capsys.readouterr()
    for args, message in cases:
        assert run_history(root, *out, *args) == 2, args
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, (args, err)


def test_expect_resolves_a_revision_of_the_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    root = tmp_path / "history"
    write(root, make_record(0, perf={"x": [1.0, 1.1]}))
    rec = make_record(1, perf={"x": [1.0, 1.05]})
    rec["commit"] = head
    write(root, rec)
    assert run_history(root, "--out", tmp_path / "out", "--no-figures", "--expect", "HEAD", "--repo", repo) == 0


def test_a_report_of_the_committed_history_lands_outside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "results" / "history"
    accuracy_history(root, 3, step_at=None, drop=0)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    assert run_history(Path("results/history/cpu-2c-test"), "--no-figures") == 0
    assert (tmp_path / "results" / "history-report" / "cpu-2c-test" / "steps.csv").is_file()
    assert run_history(Path("results/history"), "--no-figures") == 0
    assert (tmp_path / "results" / "history-report" / "steps.csv").is_file()
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before  # nothing written among the records


def test_compare_puts_two_commits_side_by_side(tmp_path, capsys):
    root = tmp_path / "history"
    for i in range(3):
        write(root, make_record(i, perf={"b.round_vs_copy_sign": [2.0, 2.1, 2.05, 2.02, 2.08] if i < 2 else
                                         [4.0, 4.2, 4.1, 4.05, 4.15],
                                         "c.steady": [1.0, 1.01, 1.02]},
                                study={"c": {"final_test_acc": [0.6, 0.61, 0.6]}}))
    out = ["--out", tmp_path / "out", "--no-figures"]
    capsys.readouterr()
    assert run_history(root, *out, "--compare", sha(0), sha(2)) == 0  # a table, not a gate
    printed = capsys.readouterr().out
    assert "worse  perf.b.round_vs_copy_sign: 2.05 -> 4.1 x (+100.0%, p 0.0079; records 1 and 1)" in printed
    table = history.read_output(tmp_path / "out" / "compare.csv").set_index("quantity")
    assert table.loc["perf.c.steady", "verdict"] == "same"
    assert table.loc["study.c.final_test_acc", "verdict"] == "same" and table.loc["perf.b.round_vs_copy_sign",
                                                                                  "change"] == pytest.approx(1.0)
    assert run_history(root, *out, "--compare", sha(0), sha(1)) == 0
    assert history.read_output(tmp_path / "out" / "compare.csv").set_index("quantity").loc[
        "perf.b.round_vs_copy_sign", "verdict"] == "same"
    capsys.readouterr()
    for args, message in [(["--compare", sha(0), sha(7)], f"--compare {sha(7)}: no record of {sha(7)[:12]} left"),
                          (["--compare", sha(0), sha(2), "--expect", sha(2)], "--compare and --expect: one at a time"),
                          (["--compare", "HEAD~999999", sha(2), "--repo", tmp_path], "--compare HEAD~999999: not a commit")]:
        assert run_history(root, *out, *args) == 2, args
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, (args, err)


def test_the_metric_judge_of_bench_bisect_reads_a_commits_clean_records(tmp_path, capsys):
    from analysis.history import metric

    root = tmp_path / "history"
    folder = write(root, make_record(0, perf={"b.x_seconds": [1.0, 1.2]}, kinds={"b.x_seconds": "absolute"})).parent
    write(root, make_record(0, perf={"b.x_seconds": [9.0]}, kinds={"b.x_seconds": "absolute"}, dirty=True))
    assert metric.main([str(folder), "--metric", "perf.b.x_seconds", "--commit", sha(0), "--reference=0.5"]) == 0
    judged = json.loads(capsys.readouterr().out)
    assert judged["values"] == [1.0, 1.2] and judged["records"] == 1 and judged["kind"] == "absolute"
    assert judged["mode"] == "rel" and judged["tolerance"] == 0.2 and judged["state"] == "bad"  # 2.2x slower
    assert metric.main([str(folder), "--metric", "perf.b.other", "--commit", sha(0)]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "skip"
    assert metric.main([str(tmp_path / "none"), "--metric", "perf.b.x_seconds"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no such record or folder" in err
