"""The regression gate cannot be fooled (issue 26): `analysis history` refuses or fails a newest commit that
failed or holds no usable values, compares records only with records of the same settings, orders commits
by the repository's graph and not by clocks, skips malformed records with their reason; `bench track`
marks a record dirty when the tracker's tree (or any tracked file) is modified and never lets a --commits
value reach git as an option."""
from __future__ import annotations

import json
import math
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from analysis.history import definitions, read_output
from bench import track
from bench.cli import main as bench_main
from bench.errors import BenchError
from bench.track.bisection import commit_range
from track_records import (ACC, CELL, MACHINE, START, accuracy_history, analysis_main, flat_history, git, git_repo,
                           history, make_checkout, one_line, record, sha, tracked, write)

PERF = {"b.round_vs_copy_sign": [1.0, 1.01], "c.overhead": [2.0, 2.02]}
NAN = {"b.round_vs_copy_sign": [math.nan, math.nan], "c.overhead": [math.nan, math.nan]}
SLOW = [1.0, 1.1]  # a perf figure at 5 before: 80 % worse


def given(*records, perf: bool = True):
    """A flat history, then ``records`` (a record, or (record, file name), or a function of the root)."""
    def build(root):
        flat_history(root, perf=perf)
        for rec in records:
            rec(root) if callable(rec) else write(root, *(rec if isinstance(rec, tuple) else (rec,)))
    return build


def edited(rec: dict, change) -> dict:
    change(rec)
    return rec


def series(*values, perf: str | None = None):
    """A history of one quantity: commit i at values[i] (per seed of the cell c, or per repeat of the perf
    figure ``perf``)."""
    def build(root):
        for i, v in enumerate(values):
            write(root, record(i, perf={perf: v}) if perf else record(i, study={"c": {"final_test_acc": v}}))
    return build


def accuracies(n=8, **kw):
    return lambda root: accuracy_history(root, n, **kw)


def _dirty_newest(root):
    accuracy_history(root, 4)
    write(root, tracked(3, dirty=True, acc=[0.5, 0.5, 0.5]), name="dirty")  # the dirty tree lost 10 points


def busy(*newest, load_start=0.5):
    """Commits 0..2 of a perf figure (higher is better) at 5.0 and of a study cell; commit 3 in one record per
    (share of the CPU other processes took while it was timed, values) in ``newest``, its bench perf started at
    ``load_start``; a share of None: a record without the measure (older bench track)."""
    def build(root):
        for i in range(4):
            for share, values in newest if i == 3 else [(0.02, [5.0, 5.1])]:
                measure = {} if share is None else {"contention": {"method": "proc-stat", "others_cpu_share": share}}
                write(root, record(i, perf={"a.speedup_n4": values}, higher=True, study={"c": {"final_test_acc": [
                    0.6, 0.6, 0.6]}}, load_average_1m={"start": load_start if i == 3 else 0.5}, **measure))
    return build


def _expected(root):
    """Commits 0..2 of a perf figure, commit 2 timed on a busy machine, and a dirty tree of commit 3."""
    for i in range(4):
        write(root, record(i, perf={"a.speedup_n4": [5.0, 5.1]}, dirty=i == 3,
                           load_average_1m={"start": 10.0 if i == 2 else 0.5}))


def _two_machines(root):  # the same ratio on both; times 10x apart
    for i in range(5):
        for machine, scale in (("cpu-2c-aaaa", 1.0), ("cuda-8c-bbbb", 10.0)):
            write(root, record(i, machine=machine, perf={"b.round_vs_copy_sign": [1.0, 1.01],
                                                         "b.round_seconds_sign": [0.1 * scale, 0.1 * scale]},
                               kinds={"b.round_seconds_sign": "absolute"}))


def _copied_into_the_newest_folder(root):
    (root / MACHINE / sha(4) / "copied.json").write_text(json.dumps(tracked(0, acc=(0.1, 0.1, 0.1))))


FAILING = {"acc": [None] * 3, "epochs": [None] * 3, "status": ["failed"] * 3,
           "errors": [f"study: {CELL}_s{s}: bench run exited 1: boom" for s in range(3)]}
FAILED, DEAD = tracked(5, perf=PERF, **FAILING), tracked(5, **FAILING)  # DEAD: no perf either, no values at all
DEAD_USER = edited(record(5, errors=["user: bench_x.time_y: ZeroDivisionError"]), lambda r: r.update(
    user={"files": ["bench_x.py"], "figures": {}}, parts=["user"]))
ONLY_B = edited(tracked(6, perf={"b.round_vs_copy_sign": [1.0, 1.01]}), lambda r: (
    r["perf"].update(command="bench perf --quick --only b"), r["study"].update(cells={})))
OTHER_MACHINE = tracked(5, machine="cuda-8c-gate", perf={**PERF, "e.cuda_only": [1.0, 1.0]})
UNUSABLE = "a record of the newest commit (or a later one) is unusable"
OLD_BUSY = busy((None, [0.05, 0.06]), load_start=10.0)  # no CPU measure (older bench track): the load average decides
BUSY_NOTE = "perf figures of busy records left out: 1 whose bench perf started with a load average above 1.5"
SPEEDUP = "perf.a.speedup_n4"


# (how the history is built, arguments, exit status, what stderr and history.md say, the newest commit's verdict
# of each quantity named, or the columns of its row)
@pytest.mark.parametrize("build, args, status, said, verdicts", [
    (accuracies(newest_drop=0.06), [], 1, [f"REGRESSION {ACC}"], {ACC: {"verdict": "regression",
                                                                         "commit": sha(7)[:12]}}),
    (accuracies(newest_drop=-0.06), [], 0, [], {ACC: "improvement"}),
    (accuracies(newest_drop=0.01), [], 0, [], {ACC: "within tolerance"}),  # 1 < 2 points
    (_dirty_newest, [], 1, [], {ACC: {"commit": sha(3)[:12] + "+dirty"}}),
    (_dirty_newest, ["--clean-only"], 0, [], {ACC: {"commit": sha(3)[:12]}}),
    (series([1.0, 1.02], [1.5, 1.52], perf="c.overhead"), ["--confirm", "1"], 1, [],  # 2 vs 2 values: p >= 1/6
     {"perf.c.overhead": {"verdict": "regression", "test": "tolerance only"}}),
    # too recent for a step (fewer than --min-side commits after it): reported, not exit status 1
    (series(*[[0.6, 0.61, 0.59]] * 4, *[[0.5, 0.51, 0.49]] * 2), [], 0, [],
     {"study.c.final_test_acc": "continues an earlier change"}),
    # by default the perf figures of a busy machine are left out, the study's numbers stay
    (OLD_BUSY, [], 0, [BUSY_NOTE], {SPEEDUP: "not measured", "study.c.final_test_acc": "within tolerance"}),
    (OLD_BUSY, ["--keep-busy", "--confirm", "1"], 1, [], {SPEEDUP: "regression"}),
    # the measured CPU share of other processes decides before the load average
    (busy((0.5, SLOW)), ["--confirm", "1"], 0,  # one other process spinning on 2 cores
     ["1 where other processes took more than 25% of the CPU while it was timed"], {}),
    (busy((0.5, SLOW)), ["--confirm", "1", "--max-busy", "0.6"], 1, [], {}),
    # a quiet measure outweighs a high load average at the start (the 1-minute average lags by a minute)
    (busy((0.05, SLOW), load_start=10.0), ["--confirm", "1"], 1, [], {}),
    # the measure is read as a number or not at all: a damaged one falls back to the load average
    (busy(("much", SLOW), load_start=10.0), ["--confirm", "1"], 0, [], {}),
    # a timing regression needs two records of the commit that each show it: one, however bad, is measured again
    (busy((0.0, SLOW)), [], 0, ["UNCONFIRMED perf.a.speedup_n4: 5.05 -> 1.05 (-79.2%) at c03, worse in 1 of 1 "
                                "records where 2 are", "| unconfirmed |"],
     {SPEEDUP: {"verdict": "unconfirmed", "records_worse": "1 of 1"}}),
    (busy((0.0, SLOW), (0.0, SLOW)), [], 1, [f"REGRESSION {SPEEDUP}"], {}),
    # a stray record and a normal one: pooled (-59 %, all 4 values below the 6 before) far off, but one record
    # (-40 %: within 50 % on its own) is not a regression
    (busy((0.0, SLOW), (0.0, [3.0, 3.1])), ["--tol", "ratio=0.5"], 0, [],
     {SPEEDUP: {"verdict": "unconfirmed", "records_worse": "1 of 2"}}),
    # the newest commit must have been measured: failures (exit 1) and refusals (exit 2)
    (given(FAILED), [], 1, ["3 failed parts or runs, e.g. study: choco-sign_ring8_s0: bench run exited 1: boom",
                            f"study.{CELL}: seeds 0, 1, 2 failed or have no value", "**Failed** (2; exit status 1)"],
     {}),
    # every run of the newest commit failed, so it has no values: it is still the newest, and it failed
    (given(DEAD), ["--expect", sha(5)], 1, ["FAILED c05: every run failed", "bench run exited 1: boom"], {}),
    (given(DEAD_USER, perf=False), [], 1, ["FAILED c05: every run failed", "ZeroDivisionError"], {}),
    (lambda root: write(root, DEAD), [], 1, ["FAILED c05: every run failed"], {}),  # nothing before it either
    (given(tracked(5, acc=[0.6, None, 0.6], epochs=[4.0, None, 5.0], status=["completed", "failed", "completed"]),
           perf=False), [], 1, [f"study.{CELL}: seed 1 failed or has no value"], {}),  # no error line: fails too
    (given(tracked(5, perf=NAN)), ["--expect", sha(5)], 2,
     [f"--expect {sha(5)}: the 1 records of {sha(5)[:12]} are unusable", "not a finite number"], {}),
    (given(tracked(5, perf=NAN), (tracked(5, perf=PERF), "second")), ["--expect", sha(5)], 1, [UNUSABLE], {}),
    # by committer date (no repository holds these commits), a NaN of a later commit than the newest usable one
    (given(tracked(5, perf={"b.round_vs_copy_sign": [math.nan, 1.0], "c.overhead": [2.0, 2.0]})), [], 1,
     [UNUSABLE], {}),
    *[(given(), [f"--expect={value}"], 2, [f"--expect {value!r}: empty or an option"], {})
      for value in ["", " ", "-x", "--output=/tmp/x"]],
    (given(tracked(5, perf={"b.round_vs_copy_sign": [1.0, 1.01]})), ["--expect", sha(5)], 1,
     ["perf.c.overhead: measured at the commit before"], {}),
    # a group bench perf was not asked for is not missing, nor a cell that did not run
    (given(tracked(5, perf={"b.round_vs_copy_sign": [1.0, 1.01]}), ONLY_B), [], 0, [], {}),
    # the commit before on this machine had no e figures
    (given(OTHER_MACHINE, tracked(6, perf={"b.round_vs_copy_sign": [1.0, 1.01], "c.overhead": [2.0, 2.0]})), [], 0,
     [], {}),
    (given(tracked(5, perf=PERF, load_average_1m={"start": 10.0})), ["--max-load", "1"], 0, [],
     {"perf.c.overhead": "not measured"}),  # figures left out for load are not missing
    (given(edited(tracked(5, perf=PERF, sizes={"round_d": 99}), lambda r: r.pop("study"))),  # nothing to compare with
     ["--expect", sha(5), "--kinds", "ratio"], 2,
     ["none of the newest commit's 2 quantities has an earlier commit of the same settings"], {}),
    (given(edited(tracked(5, perf=PERF, sizes={"round_d": 99}), lambda r: r.pop("study"))), ["--kinds", "ratio"], 0,
     [], {"perf.c.overhead[sizes d7746692]": "first commit"}),  # without --expect: first commits
    # records are compared only with records of the same settings: the same code read at a target of 60 %
    (given(tracked(5, epochs=(7.0, 7.5, 8.0), target=0.6), perf=False), [], 0,
     ["3 quantities were measured with different settings"],
     {f"study.{CELL}.epochs_to_target[target 0.6]": "first commit",
      f"study.{CELL}.epochs_to_target[target 0.5]": "not measured",
      ACC: "within tolerance"}),  # the target is no setting of the final accuracy
    (given(edited(tracked(7, START - timedelta(hours=1), epochs=(9.0, 9.0, 9.0)), lambda r: (  # an older bench track
        r["study"].pop("target_acc"), r["study"].pop("config_digest"))), perf=False), [], 0,
     ["1 records do not store their settings (older bench track): they are the group 'settings not recorded'"], {}),
    (given(edited(tracked(5, perf={"b.round_vs_copy_sign": [3.0, 3.1], "c.overhead": [9.0, 9]}), lambda r: r.update(
        machine={"id": "cuda-16c-gate", "cores": 16, "device": "cuda: H200"}))), ["--kinds", "ratio"], 0, [],
     {"perf.b.round_vs_copy_sign[device cuda: H200]": "first commit", "perf.c.overhead[device cpu]": "not measured"}),
    (given(perf=False), ["--repo", "/nonexistent/repo"], 0,
     ["is not a git checkout (or git cannot run): commits are in committer-date order"], {}),
    (given(_copied_into_the_newest_folder, perf=False), [], 1,  # in the newest commit's folder: a failure
     [f"copied.json: its commit {sha(0)[:12]} is not that of its folder {sha(4)[:12]}"], {}),
    (given(tracked(sha(4)[:12] + "0" * 28, START + timedelta(hours=9)), perf=False), [], 2,
     [f"share the point {sha(4)[:12]}"], {}),
    (_expected, ["--expect", sha(2), "--clean-only", "--keep-busy"], 0, [], {}),
    # one record: the noise of its repeats is said, a record's distance from its segment cannot be
    (series([1.0, 1.02], perf="c.overhead"), [], 0, [
        "ratio (tolerance 15%): the repeats of a commit span 2% of their median (median over 1 figures; 90th "
        "percentile 2%, max 2%)\n"], {}),
    # ratios are pooled across machines; absolute times are compared only with the same machine's
    (_two_machines, [], 0, [], {"perf.b.round_vs_copy_sign": "within tolerance", **{
        f"perf.b.round_seconds_sign@{m}": "within tolerance" for m in ("cpu-2c-aaaa", "cuda-8c-bbbb")}}),
    (lambda root: None, [], 2, ["history directory not found"], {}),
    (lambda root: (root.mkdir(), (root / "junk.json").write_text("{not json")), [], 2, ["no bench track records"], {}),
    # bad options, and an --expect or --compare that names no commit measured as it asks
    *[(_expected, args, 2, [message], {}) for args, message in [
        (["--expect", sha(2), "--keep-busy"], f"{sha(2)[:12]} is not the newest commit read"),  # a dirty 3 later
        (["--tol", "speed=0.1"], "KIND=VALUE"),
        (["--tol", "ratio=-1"], "finite and > 0"),
        (["--kinds", "ratio,bogus"], "--kinds"),
        (["--alpha", "2"], "--alpha"),
        (["--only", "nothing.*"], "no tracked values left"),
        (["--max-busy", "1.5"], "must be a share of the CPU, in [0, 1]"),
        (["--max-load", "-1"], "must be a finite load per core >= 0"),
        (["--confirm", "0"], "must be >= 1"),
        (["--confirm", "two"], "not a whole number"),
        (["--compare", sha(0), sha(7)], f"--compare {sha(7)}: no record of {sha(7)[:12]} left"),
        (["--compare", sha(0), sha(2), "--expect", sha(2)], "--compare and --expect: one at a time"),
        (["--compare", "HEAD~999999", sha(2), "--repo", "/nonexistent/repo"], "--compare HEAD~999999: not a commit"),
        (["--expect", sha(2), "--clean-only"], f"the records of {sha(2)[:12]} have no values left"),
        (["--expect", sha(3), "--clean-only"], f"no clean record of {sha(3)[:12]}"),
        (["--expect", sha(9)], f"no record of {sha(9)[:12]}"),
        (["--expect", "no-such-rev", "--repo", "/nonexistent/repo"], "--expect no-such-rev: not a commit of")]],
])
def test_the_gate_on_the_newest_commit(tmp_path, capsys, build, args, status, said, verdicts):
    build(tmp_path / "h")
    out = tmp_path / "out"
    assert history(tmp_path / "h", "--no-figures", "--out", out, *args) == status
    err = one_line(capsys) if status == 2 else capsys.readouterr().err
    text = err + ((out / "history.md").read_text() if status != 2 else "")
    assert all(s in text for s in said), text
    assert status != 0 or "FAILED" not in err
    assert status != 2 or (not out.exists() and err.startswith("analysis history: error:"))  # nothing written
    table = read_output(out / "newest.csv").set_index("quantity") if verdicts else None
    for quantity, expected in verdicts.items():
        expected = expected if isinstance(expected, dict) else {"verdict": expected}
        row = table.loc[quantity]
        assert {k: row[k][:len(v)] if k == "test" else row[k] for k, v in expected.items()} == expected, quantity


# -- commit order comes from the repository's graph, not from clocks ------------------------------------------
def test_a_skewed_clock_does_not_hide_a_regression(tmp_path, capsys):
    repo = tmp_path / "repo"  # 6 commits; the newest made on a machine whose clock is a year behind
    commits = git_repo(repo, 6, [START + timedelta(hours=i) for i in range(5)] + [START - timedelta(days=365)])
    for i, commit in enumerate(commits):
        date = datetime.fromisoformat(git(repo, "show", "-s", "--format=%cI", commit))
        write(tmp_path / "h", tracked(commit, date, acc=(0.50, 0.51, 0.49) if i == 5 else (0.60, 0.61, 0.59)))
    out = ["--no-figures", "--out", tmp_path / "out"]
    assert history(tmp_path / "h", *out, "--repo", repo) == 1
    assert read_output(tmp_path / "out" / "newest.csv").set_index("quantity").loc[
        f"study.{CELL}.final_test_acc", "commit"] == commits[-1][:12]
    assert f"REGRESSION study.{CELL}.final_test_acc" in capsys.readouterr().err
    assert history(tmp_path / "h", *out, "--repo", repo, "--order", "git") == 1  # the first-parent chain of HEAD
    # by the clocks, the newest commit would come first: chosen, the order says so
    assert history(tmp_path / "h", *out, "--order", "date") == 0


def test_records_of_commits_the_repository_lacks_are_no_baseline(tmp_path, capsys):
    """Two copies of the regressed newest record relabelled with hashes the repository lacks (placed first) had
    turned its regression into "within noise", exit 0: they are left out and named in the verdict line; nor does
    one, whatever its date (a year after the rest here), become the newest."""
    repo, slower = tmp_path / "repo", {"c.overhead": [2.0, 2.02]}
    for i, commit in enumerate(git_repo(repo, 5)):
        perf = {"c.overhead": [1.0, 1.01]} if i < 4 else slower
        write(tmp_path / "h", record(commit, START + timedelta(hours=i), perf=perf))
    for k in range(2):  # the first a year after the rest
        write(tmp_path / "h", record(sha(100 + k), START + timedelta(days=400 * (1 - k)), perf=slower))
    out = ["--no-figures", "--out", tmp_path / "out", "--repo", repo, "--confirm", "1", "--expect", "HEAD"]
    assert history(tmp_path / "h", *out) == 1  # HEAD, the newest
    said = capsys.readouterr()
    assert "2 commits are not in the repository" in said.err
    (verdict,) = [line for line in said.out.splitlines() if line.startswith("newest commit")]
    assert verdict.endswith(f"1 regression; not compared: 2 commits not in the repository (2 records, e.g. "
                            f"{sha(101)[:12]})"), verdict
    assert read_output(tmp_path / "out" / "newest.csv").loc[0, "previous_commits"] == 4


@pytest.mark.parametrize("declared, status", [(True, 0), (False, 1)])
def test_a_declared_redefinition_starts_a_new_series(tmp_path, capsys, monkeypatch, declared, status):
    """The bits per worker doubled at a commit that counted them per link (f2fd5e0): declared, a new series that is
    never compared with the old one (exit 0; --compare leaves it out, bisect refuses); undeclared, a regression."""
    repo, name = tmp_path / "repo", f"study.{CELL}.bits_to_target"
    commits = git_repo(repo, 6)
    for i, commit in enumerate(commits):  # the newest commit's bits double (tracked's: 4e6, 4.5e6, 5e6)
        rec = tracked(commit, START + timedelta(hours=i))
        write(tmp_path / "h", edited(rec, lambda r: r["study"]["cells"][CELL].update(bits_to_target=[8e6, 9e6, 1e7]))
              if i == 5 else rec)
    monkeypatch.setattr(definitions, "REDEFINITIONS", {"study.*.bits_to_target": [(commits[5], "per link")]
                                                       if declared else []})
    out = ["--no-figures", "--out", tmp_path / "out", "--repo", repo]
    assert history(tmp_path / "h", *out) == status
    assert (f"REGRESSION {name}" in capsys.readouterr().err) is not declared
    assert history(tmp_path / "h", *out, "--compare", commits[4], commits[5]) == 0
    listed = set(read_output(tmp_path / "out" / "compare.csv")["quantity"])
    assert (name in listed) is not declared and f"study.{CELL}.epochs_to_target" in listed
    assert len(definitions.between(name, commits[4], commits[5], str(repo))) == declared
    assert definitions.between(name, commits[3], commits[4], str(repo)) == []
    # the history's browser (beside its report) marks the commit of the new definition, and only a declared one
    assert analysis_main(["browse", str(tmp_path / "h"), "--repo", str(repo)]) == 0
    assert (f"definition 1 before {commits[5][:7]} → " in (tmp_path / "h.report/browser.html").read_text()) is declared


def test_names_subjects_and_errors_reach_history_md_as_text(tmp_path):
    """Whatever renders history.md (here Python-Markdown with raw HTML on), a record's subject, describe, user
    benchmark name and error lines are shown as text: no tag, no link; in a figure, a unit is no mathtext."""
    import markdown

    hostile = "[x](javascript:alert(1))"
    for i in range(6):
        rec = record(i, errors=["<script>alert(2)</script>"] * (i == 5))
        rec.update(subject="<script>alert(1)</script>", describe=f"<img src=x onerror=alert(3)>{i}", user={
            "files": ["b.py"], "figures": {hostile: {"values": [2.0 if i == 5 else 1.0], "unit": "$\\foo{$"}}})
        write(tmp_path / "h", rec)
    assert history(tmp_path / "h", "--out", tmp_path / "out") == 1
    text = (tmp_path / "out" / "history.md").read_text()
    page = markdown.markdown(text, extensions=["tables"])
    assert "<script" not in page and "<img" not in page and page.count("href") == page.count('href="figures/') == 1
    assert all(f"alert({i})" in page for i in (1, 2, 3)) and "regression" in page  # shown, as text


# -- malformed records are skipped with their reason, never a traceback ---------------------------------------
def _set(*path, value):
    def change(rec):
        for key in path[:-1]:
            rec = rec[key]
        rec[path[-1]] = value
    return change


def _figure(fig):
    return _set("perf", value={"figures": {"b.round_vs_copy_sign": fig}})


@pytest.mark.parametrize("bad, reason", [
    (_set("perf", value=[1, 2]), "perf is list, not an object"),
    (_set("perf", value={"figures": [1.0]}), "perf.figures is list, not an object"),
    (_figure({"values": [], "unit": "x"}), "perf figure 'b.round_vs_copy_sign' has no values"),
    (_figure({"unit": "x"}), "perf figure 'b.round_vs_copy_sign': value None is not a finite number"),
    (_figure({"values": [1.0, math.nan]}), "value nan is not a finite number"),
    (_figure({"values": [10 ** 400]}), "is not a finite number"),  # a JSON integer float() cannot hold
    (lambda rec: rec["study"]["cells"][CELL].pop("seeds"), f"study cell '{CELL}' has no list of seeds"),
    (_set("errors", value="boom"), "errors is str, not a list"),
    (_set("machine", value="cpu"), "machine has no id"),
    (_set("commit", value="zz"), "commit is 'zz'"),
    (_set("commit_date", value="yesterday"), "commit_date is 'yesterday', not an ISO date"),
    *[(text, "") for text in ["[1, 2]", "[" * 100000 + "]" * 100000, "\xff\xfe", '{"kind": "choco-track"']],
])
def test_malformed_records_are_left_out_with_their_reason(tmp_path, capsys, bad, reason):
    flat_history(tmp_path / "h")
    path = tmp_path / "h" / MACHINE / sha(1) / "bad.json"
    if callable(bad):
        bad = json.dumps(edited(tracked(1, perf={"b.round_vs_copy_sign": [1.0]}), bad))
    path.write_bytes(bad.encode("latin-1"))
    assert history(tmp_path / "h", "--no-figures", "--out", tmp_path / "out") == 0  # noted, the rest compared
    err = capsys.readouterr().err
    (note,) = [line for line in err.splitlines() if "bad.json" in line]
    assert "Traceback" not in err and reason in note and note.endswith("(left out)")


def test_measured_reads_a_folder_of_odd_json_without_a_traceback(tmp_path):
    (tmp_path / "a.json").write_text("[1, 2]")
    (tmp_path / "b.json").write_text("[" * 100000)
    assert track.measured(tmp_path) is False
    (tmp_path / "c.json").write_text(json.dumps({"kind": "choco-track", "dirty": False, "errors": []}))
    assert track.measured(tmp_path) is True


# -- bench track: dirty means any change to what computes the numbers -----------------------------------------
@pytest.fixture
def checkout(tmp_path) -> Path:
    return make_checkout(tmp_path / "repo")


def test_a_modified_tracker_makes_the_record_dirty(tmp_path, checkout, monkeypatch):
    monkeypatch.setattr(track.quickset, "run_perf", lambda repo, work, device, only, say: (
        {"wall_s": 1.0, "figures": {"b.x": {"values": [1.0, 1.1], "kind": "ratio"}}}, []))
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


@pytest.mark.parametrize("change, expected", [
    (lambda repo: (repo / "bench" / "__init__.py").write_text("x = 2\n"), ["bench/__init__.py"]),
    (lambda repo: (repo / "Makefile").write_text("changed\n"), ["Makefile"]),
    (lambda repo: (repo / "analysis" / "summary.py").unlink(), ["analysis/summary.py"]),
    (lambda repo: (repo / "sitecustomize.py").write_text("import os\n"), ["sitecustomize.py"]),
    (lambda repo: (repo / "analysis" / "new.txt").write_text("a\n"), ["analysis/new.txt"]),
    (lambda repo: (git(repo, "update-index", "--assume-unchanged", "bench/__init__.py"),
                   (repo / "bench" / "__init__.py").write_text("x = 3\n")),
     ["bench/__init__.py (not checked by git)"]),
    # untracked files that are not code leave the tree clean
    (lambda repo: ((repo / "notes.txt").write_text("n\n"), (repo / "results").mkdir(),
                   (repo / "results" / "r.json").write_text("{}\n")), []),
])
def test_any_change_to_a_tracked_file_or_importable_code_is_dirty(checkout, change, expected):
    change(checkout)
    info = track.commit_info(checkout)
    assert info["dirty"] is bool(expected) and sorted(info.get("dirty_files", [])) == sorted(expected)
    assert info["describe"].endswith("-dirty") is bool(expected)


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
    err = one_line(capsys)
    assert status == 2 and "may not be empty or start with '-'" in err and err.startswith("bench: error: --commits")


def test_git_gets_end_of_options_even_when_the_check_is_bypassed_and_bisect_refuses_a_dash(tmp_path, checkout,
                                                                                         monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    with pytest.raises(BenchError, match="may not be empty or start with '-'"):
        commit_range(str(checkout), f"--output={victim}", "HEAD")
    monkeypatch.setattr(track.commits, "check_commits", lambda spec: None)
    for spec in (f"--output={victim}..HEAD", f"--output={victim}"):
        with pytest.raises(BenchError):
            track.commit_list(checkout, spec)
    assert victim.read_text() == "keep me\n"
