"""analysis history and bench bisect on synthetic histories: planted steps are found at their commit, flat
noise is not, the newest commit's regression is exit status 1, bisect names the commit that introduced a step."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from analysis import history as hist
from analysis.history import metric
from analysis.history.metric import judge, metric_values
from bench.cli import main as bench_main
from bench.track import bisection
from bench.track.bisection import BisectError, bisect, parse_metric
from track_records import (ACC, CELL, MACHINE, START, accuracy_history, git_repo, history, one_line, record, sha,
                           tracked, write)

NO_FIGURES = ("--no-figures",)


def test_a_planted_step_is_found_at_its_commit_and_a_commit_of_digits_only_stays_its_hash(tmp_path, capsys):
    # 12-character hashes of decimal digits only (about one in 280) read as integers with pd.read_csv's
    # default, the leading zeros lost; read_output keeps every commit column as text
    root, out = tmp_path / "history", tmp_path / "out"
    rng = np.random.default_rng(3)
    commit = lambda i: f"{i:012d}" + "1" * 28  # noqa: E731
    for i in range(12):
        acc = np.round((0.60 if i < 7 else 0.55) + rng.normal(0, 0.005, 3), 4).tolist()
        for repeat in range(1 + (i == 11)):  # the newest commit doubles a lower-is-better ratio, in two records
            ratio = (2.0 if i == 11 else 1.0) + rng.normal(0, 0.02, 2)
            rec = record(i, perf={"b.round_vs_copy_sign": ratio}, study={CELL: {"final_test_acc": acc}}, started=repeat)
            write(root, {**rec, "commit": commit(i), "describe": commit(i)[:7]})
    assert history(root / MACHINE, "--out", out, "--order", "date") == 1
    (step,) = [row for _, row in hist.read_output(out / "steps.csv").iterrows() if row["quantity"] == ACC]
    assert (step["first_commit"], step["previous_commit"], step["describe"]) == (commit(7)[:12], commit(6)[:12],
                                                                                 "0000000")
    assert step["p_adj"] < 0.05 and step["verdict"] == "regression" and step["change"] == pytest.approx(-0.05, abs=0.01)
    assert f"study.{CELL}.final_test_acc 000000000007" in capsys.readouterr().out  # the steps printed
    newest = hist.read_output(out / "newest.csv").set_index("quantity")
    assert set(newest["commit"]) == {commit(11)[:12]} and newest.loc[ACC, "verdict"] == "within tolerance"
    row = newest.loc["perf.b.round_vs_copy_sign"]
    assert row["verdict"] == "regression" and row["change"] == pytest.approx(1.0, abs=0.1)
    table = hist.read_output(out / "history.csv")
    assert set(table["commit"]) == {commit(i) for i in range(12)}
    newest_ratios = table[(table["point"] == commit(11)[:12]) & (table["quantity"] == "perf.b.round_vs_copy_sign")]
    assert newest_ratios["value"].size == 4  # the repeats of the commit's two records pooled
    assert (out / "figures" / "perf.b.round_vs_copy_sign.png").stat().st_size > 1000
    assert "Newest commit" in (out / "history.md").read_text()


def test_the_history_figures_show_accuracy_in_percent_bits_in_mbit_and_a_step_in_ms(tmp_path, monkeypatch):
    """The units of units.UNITS, as the study figures: no fraction, no raw bits under a 1e8 offset, no 0.0004 s."""
    axes = {}
    monkeypatch.setattr("matplotlib.pyplot.close",
                        lambda fig: axes.update({fig.axes[0].get_title().split("\n")[0]: fig.axes[0]}))
    for i in range(4):
        write(tmp_path, {**tracked(i, epochs=(116.0, 116.2 + i / 10, 116.1)),
                         "perf": {"figures": {"b.round_seconds_sign": {"values": [4e-4, 4.1e-4], "unit": "s"}}}})
    assert history(tmp_path / MACHINE, "--out", tmp_path / "out") == 0
    for quantity, unit, low, high in [(ACC, "test accuracy (%)", 58, 62), ("perf.b.round_seconds_sign", "ms", .39, .42),
                                      (f"study.{CELL}.bits_to_target", "Mbit sent per worker", 116, 117)]:
        ax = axes[quantity]
        ax.figure.canvas.draw()
        ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        assert ax.get_ylabel() == unit and low <= min(ticks) < max(ticks) <= high, (quantity, ticks)
        assert ax.yaxis.get_offset_text().get_text() == "", quantity


def steps_of(levels: list[float], noise: float = 0.01) -> list[np.ndarray]:
    return [np.full(3, level) + noise * np.arange(3) for level in levels]


@pytest.mark.parametrize("values, min_side, found", [
    (steps_of([1.0] * 5 + [2.0] * 5 + [3.0] * 5), 3, [5, 10]),  # two steps: both found
    (steps_of([1.0] * 2 + [5.0] * 2, noise=0.1), 3, []),  # too short for min_side: no step
])
def test_steps_are_found_where_planted_and_not_in_a_series_too_short_for_min_side(values, min_side, found):
    assert [s["index"] for s in hist.find_steps(values, alpha=0.05, min_side=min_side)] == found


def test_flat_noise_gives_few_false_steps():
    # 40 flat series of 12 commits x 3 noisy values: Bonferroni over the splits keeps false steps rare
    false = sum(bool(hist.find_steps([np.random.default_rng(seed).normal(1.0, 0.1, 3) for _ in range(12)],
                                     alpha=0.05, min_side=3)) for seed in range(40))
    assert false <= 3  # the level is 0.05 per series; Bonferroni makes it conservative


def test_the_report_lands_beside_the_history_or_outside_a_committed_one(tmp_path, monkeypatch):
    root = tmp_path / "history"
    accuracy_history(root, 3)
    assert history(root / MACHINE, *NO_FIGURES) == 0
    assert (root / f"{MACHINE}.report" / "steps.csv").is_file()
    assert history(root, *NO_FIGURES) == 0  # the report folder beside a machine's is not read as records
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "results" / "history"
    accuracy_history(committed, 3)
    before = sorted(p.relative_to(committed) for p in committed.rglob("*"))
    assert history(Path("results/history"), *NO_FIGURES) == 0
    assert (tmp_path / "results" / "history-report" / "steps.csv").is_file()
    assert sorted(p.relative_to(committed) for p in committed.rglob("*")) == before  # nothing among the records


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """A repository of 9 empty commits, read by the tests that order, resolve or bisect commits (never changed)."""
    path = tmp_path_factory.mktemp("repo") / "repo"
    return path, git_repo(path, 9)


def test_commits_of_the_same_second_are_ordered_by_their_place_on_the_chain(tmp_path):
    for i, generation in enumerate([12, 10, 11]):
        rec = record(i, study={"c": {"final_test_acc": [0.6, 0.6, 0.6]}}, started=-i)
        rec["commit_date"], rec["generation"] = START.isoformat(), generation
        write(tmp_path / "same", rec)
    assert history(tmp_path / "same", "--out", tmp_path / "out", *NO_FIGURES) == 0
    table = hist.read_output(tmp_path / "out" / "history.csv").drop_duplicates("point").sort_values("order")
    assert table["commit"].tolist() == [sha(1), sha(2), sha(0)]


def test_compare_puts_two_commits_side_by_side(tmp_path, capsys):
    root = tmp_path / "history"
    for i in range(3):
        write(root, record(i, perf={"b.round_vs_copy_sign": [2.0, 2.1, 2.05, 2.02, 2.08] if i < 2 else
                                    [4.0, 4.2, 4.1, 4.05, 4.15], "c.steady": [1.0, 1.01, 1.02]},
                           study={"c": {"final_test_acc": [0.6, 0.61, 0.6]}}))
    out = ["--out", tmp_path / "out", *NO_FIGURES]
    capsys.readouterr()
    assert history(root, *out, "--compare", sha(0), sha(2)) == 0  # a table, not a gate
    printed = capsys.readouterr().out
    assert "worse  perf.b.round_vs_copy_sign: 2.05 -> 4.1 x (+100.0%, p 0.0079; records 1 and 1)" in printed
    table = hist.read_output(tmp_path / "out" / "compare.csv").set_index("quantity")
    assert table.loc["perf.c.steady", "verdict"] == table.loc["study.c.final_test_acc", "verdict"] == "same"
    assert table.loc["perf.b.round_vs_copy_sign", "change"] == pytest.approx(1.0)


# -- bisect -------------------------------------------------------------------------------------------------
def fake_judge(values_of: dict[str, list[float] | None], higher_is_better: bool, tol: float, mode: str = "rel"):
    """A probe of bench bisect: the values planted at a commit, judged as analysis.history.metric judges them."""
    return lambda commit, reference: judge(values_of[commit] or [], reference, higher_is_better, mode, tol)


def test_bisect_refuses_a_bad_that_is_not_worse():
    values = {"g": [1.0, 1.0], "m": [1.0, 1.0], "b": [1.05, 1.05]}  # 5 % < 15 %
    with pytest.raises(BisectError, match="not worse than GOOD"):
        bisect(["g", "m", "b"], fake_judge(values, higher_is_better=False, tol=0.15))


@pytest.mark.parametrize("unmeasured, first_bad, candidates", [
    (["c5"], None, ["c5", "c6"]),  # the first bad commit does not build: it and c6 are the candidates
    (["c4"], None, ["c4", "c5"]),  # the last good commit cannot be measured: it may be the first bad one
    (["c2", "c6"], "c5", ["c5"]),  # skipped commits away from the step: the search goes round them
])
def test_bisect_skips_commits_that_cannot_be_measured(unmeasured, first_bad, candidates):
    commits = [f"c{i}" for i in range(9)]
    values = {c: (None if c in unmeasured else [0.6] * 3 if i < 5 else [0.5] * 3) for i, c in enumerate(commits)}
    result = bisect(commits, fake_judge(values, higher_is_better=True, tol=0.02, mode="abs"))
    assert result["first_bad"] == first_bad and result.get("candidates") == candidates


def test_bisect_metric_names_and_the_values_read_from_records(tmp_path):
    assert parse_metric("perf.b.round_vs_copy_sign")["parts"] == ["--parts", "perf", "--perf-only", "b"]
    assert parse_metric(ACC)["parts"] == ["--parts", "study", "--cells", "choco-sign_ring8"]
    with pytest.raises(BisectError):
        parse_metric("study.choco-sign_ring8.speed")
    rec = {**record(0, perf={"b.round_vs_copy_sign": [1.0, 2.0]}, study={"cell": {"final_test_acc": [0.5, 0.6, 0.7]}}),
           "_path": str(tmp_path / "r.json")}
    values, meta = metric_values([rec, {**rec, "_path": "other"}], "study.cell.final_test_acc")
    assert values == [0.5, 0.6, 0.7] and meta["kind"] == "accuracy" and meta["higher_is_better"]


@pytest.mark.parametrize("args, message", [
    (["HEAD~1", "HEAD", "--metric", "speed"], "is not perf.<figure>"),
    (["nope", "HEAD", "--metric", "perf.b.round_vs_copy_sign"], "must be commits of this repository"),
    (["HEAD", "HEAD~1", "--metric", "perf.b.round_vs_copy_sign"], "is not an ancestor"),
    (["HEAD~1", "HEAD", "--metric", "perf.b.x", "--tol", "nan"], "--tol"),
])
def test_bisect_bad_input_is_one_line_and_exit_2(repo, capsys, args, message):
    assert bench_main(["bisect", *args, "--repo", str(repo[0])]) == 2
    assert message in one_line(capsys)


@pytest.mark.slow  # a git repository and bisect processes (4 s): make test, not test-fast
def test_bench_bisect_names_the_first_bad_commit_from_stored_records(tmp_path, capsys, monkeypatch, repo):
    """The whole command on a real repository, every probe answered by the records already in --history
    (a measurement would fail the test: `bench track` is not run)."""
    path, commits = repo
    root = tmp_path / "history"
    for i, commit in enumerate(commits):  # seconds: commit 6 made it 50 % slower
        write(root, {**record(i, perf={"b.x_seconds": [1.0, 1.01, 0.99] if i < 6 else [1.5, 1.51, 1.49]}),
                     "commit": commit})

    def track(self, *args, cwd=None):
        assert "--print-machine" in args, args
        return "cpu-2c-test\n{}\n"

    monkeypatch.setattr(bisection.TrackProbe, "_track", track)
    argv = ["bisect", commits[0], commits[-1], "--metric", "perf.b.x_seconds", "--repo", str(path),
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


def test_the_metric_judge_of_bench_bisect_reads_a_commits_clean_records(tmp_path, capsys):
    root = tmp_path / "history"
    folder = write(root, record(0, perf={"b.x_seconds": [1.0, 1.2]}, kinds={"b.x_seconds": "absolute"})).parent
    write(root, record(0, perf={"b.x_seconds": [9.0]}, kinds={"b.x_seconds": "absolute"}, dirty=True))
    assert metric.main([str(folder), "--metric", "perf.b.x_seconds", "--commit", sha(0), "--reference=0.5"]) == 0
    judged = json.loads(capsys.readouterr().out)
    assert judged["values"] == [1.0, 1.2] and judged["records"] == 1 and judged["kind"] == "absolute"
    assert judged["mode"] == "rel" and judged["tolerance"] == 0.2 and judged["state"] == "bad"  # 2.2x slower
    assert metric.main([str(folder), "--metric", "perf.b.other", "--commit", sha(0)]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "skip"
    assert metric.main([str(tmp_path / "none"), "--metric", "perf.b.x_seconds"]) == 2
    assert "no such record or folder" in one_line(capsys)
