"""bench track: one record per invocation under <out>/<machine>/<commit>/, never overwritten (a re-run adds
repeats); the commit, its date and dirty flag, a host-independent machine fingerprint; bad input is one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import track
from bench.cli import main as bench_main
from bench.track import freshness
from track_records import git, make_checkout, one_line

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_perf(monkeypatch):
    calls = []

    def run_perf(repo, work, device, only, say):
        calls.append((repo, only))
        return {"wall_s": 1.0, "figures": {"b.round_vs_copy_sign": {"values": [2.0, 2.2], "median": 2.1, "unit": "x",
                                                                    "kind": "ratio", "higher_is_better": False}}}, []
    monkeypatch.setattr(track.quickset, "run_perf", run_perf)  # track_one looks it up there
    # the tracker (this checkout, often being edited) taken as clean: tests/test_history_gate.py tests its dirt
    monkeypatch.setattr(track.quickset, "tracker_state", lambda repo: {
        "commit": None, "same_checkout": False, "dirty": False, "dirty_files": []})
    return calls


@pytest.fixture
def checkout(tmp_path) -> Path:
    return make_checkout(tmp_path / "repo")


def records(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*.json") if p.name != "machine.json")


def test_a_record_per_invocation_never_overwritten(tmp_path, checkout, fake_perf, capsys, monkeypatch):
    out = checkout / "results" / "history"  # the committed history of the checkout measured
    argv = ["track", "--repo", str(checkout), "--out", str(out), "--parts", "perf"]
    assert bench_main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr("platform.node", lambda: "another-host")  # the machine's id does not name the host
    monkeypatch.setattr("socket.gethostname", lambda: "another-host")
    assert bench_main(argv) == 0  # the same second, possibly: a second file all the same
    said = capsys.readouterr()  # progress on stderr, a line a step with the time since the start; stdout: the record
    assert said.out.startswith("wrote ") and said.out.count("\n") == 1 and "\r" not in said.err
    assert "track: perf --quick: started [0 s]\n" in said.err
    # nothing left behind but what is to be committed: the records and the machine's fingerprint
    assert {line[3:].split("/")[-1] for line in git(checkout, "status", "--porcelain", "-uall").splitlines()} == {
        "machine.json", *(p.name for p in records(out))}
    found = records(out)
    assert len(found) == 2 and found[0] != found[1]
    commit = git(checkout, "rev-parse", "HEAD")
    machine = track.machine_id(track.fingerprint())
    assert all(p.parent == out / machine / commit for p in found)  # both hosts' records
    assert machine.startswith(f"cpu-{track.fingerprint()['cores']}c-")
    rec = json.loads(found[0].read_text())
    assert rec["kind"] == "choco-track" and rec["commit"] == commit and rec["subject"] == "commit 0"
    assert rec["commit_date"] == git(checkout, "show", "-s", "--format=%cI", "HEAD") and rec["dirty"] is False
    assert rec["machine"]["id"] == machine and {"cpu", "cores", "torch", "device"} <= set(rec["machine"])
    assert rec["perf"]["figures"]["b.round_vs_copy_sign"]["values"] == [2.0, 2.2] and rec["errors"] == []
    # what other processes took of the CPU while bench perf timed (the meter's values: tests/test_contention.py)
    assert rec["perf"]["contention"]["method"] in ("proc-stat", "unavailable")
    assert json.loads((out / machine / "machine.json").read_text())["id"] == machine
    assert fake_perf[0][0] == checkout.resolve()  # the code under test is --repo's


def test_track_check_refuses_a_committed_history_too_far_behind_and_refresh_a_dirty_tree(checkout, capsys):
    def record_of_head():
        (checkout / "results" / "history" / "m" / git(checkout, "rev-parse", "HEAD")).mkdir(parents=True)
        (checkout / "results" / "history" / "m" / git(checkout, "rev-parse", "HEAD") / "r.json").write_text("{}")
    first = git(checkout, "rev-parse", "HEAD")
    record_of_head()
    git(checkout, "add", "results")
    for i in range(3):  # the first commits the record: HEAD is 3 first-parent commits after the record's commit
        git(checkout, "commit", "-q", "--allow-empty", "-m", f"later {i}")
    record_of_head()  # not committed: no proof that the history was kept
    check = ["--repo", str(checkout), "--max-behind"]
    assert freshness.main([*check, "3"]) == 0 and freshness.main([*check, "2"]) == 1
    assert one_line(capsys).endswith(f"is 3 first-parent commits behind HEAD (newest record: {first[:12]}), more than "
                                     "TRACK_MAX_BEHIND=2: run `make track-refresh` and commit results/history")
    (checkout / "Makefile").write_text("changed\n")
    assert freshness.main(["--repo", str(checkout), "--clean"]) == 2 and "(Makefile)" in one_line(capsys)


def test_write_new_never_replaces_a_file(tmp_path):
    paths = [track.write_new(tmp_path, "20260101T000000Z", f"{i}\n") for i in range(3)]
    assert [p.name for p in paths] == ["20260101T000000Z.json", "20260101T000000Z-1.json", "20260101T000000Z-2.json"]
    assert [p.read_text() for p in paths] == ["0\n", "1\n", "2\n"]  # no temporary left: the test above


def test_the_tracking_study_is_a_small_slice_with_three_seeds():
    study, _ = track.load_study(str(track.DEFAULT_CONFIG))
    assert len(study.seeds) == 3 and len(study.cells) <= 4 and not study.tuned_cells
    settings = study.merged(next(iter(study.cells.values())))
    assert settings["compute_time"] > 0  # modelled compute time: time to target is machine-independent
    assert track.select_cells(study, "choco-*") == [c for c in study.cells if c.startswith("choco-")]


@pytest.mark.parametrize("args, message", [
    (["--parts", "perf,speed"], "--parts 'perf,speed': speed; allowed: perf, study"),
    (["--parts", "perf", "--cells", "choco-*"], "--cells needs the study part"),
    (["--parts", "study", "--perf-only", "b"], "--perf-only needs the perf part"),
    (["--cells", "nothing-*"], "matches none of the study's cells"),
    (["--target-acc", "1.5"], "must be in (0, 1]"),
    (["--target-acc", "nan"], "finite number > 0"),
    (["--repo", "{tmp}"], "no bench package there"),
    (["--repo", "{nogit}"], "not a git checkout"),
    (["--config", "{tmp}/missing.yaml"], "missing.yaml"),
    (["--device", "tpu"], "allowed: cpu"),
    (["--skip-measured"], "goes with --commits"),
    (["--commits", "nope..HEAD"], "not a range of"),
    (["--commits", "HEAD,nope"], "'nope' is not a commit"),
    (["--parts", "user"], "the user part needs --benchmarks"),
    (["--parts", "perf", "--benchmarks", "{nogit}/bench/__init__.py"], "--benchmarks needs the user part"),
    (["--benchmarks", "nowhere.py"], "--benchmarks nowhere.py: not a .py file or a folder of them"),
    (["--benchmarks", "{nogit}"], "no .py files in that folder"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, checkout, args, message):
    nogit = tmp_path / "nogit"
    (nogit / "bench").mkdir(parents=True)
    (nogit / "bench" / "__init__.py").write_text("")
    args = [a.format(tmp=tmp_path, nogit=nogit) for a in args]
    if "--repo" not in args:
        args += ["--repo", str(checkout)]
    try:
        status = bench_main(["track", "--out", str(tmp_path / "history"), *args])
    except SystemExit as stop:  # refused by the argument parser
        status = stop.code
    assert status == 2 and message in one_line(capsys)
    assert not (tmp_path / "history").exists()  # nothing ran, nothing written


@pytest.mark.slow
def test_bench_track_runs_the_study_and_perf_of_this_checkout(tmp_path, monkeypatch):
    # a slice of the quick set as `bench bisect` probes it (one cell, perf group b), on the tracking study cut to
    # one seed of 2 epochs: what is checked is bench track's way from runs to a record (a re-run writes a second
    # record: test_a_record_per_invocation_never_overwritten; the same numbers again: tests/test_repeatable_runs.py);
    # config/track.yaml itself is `make track-check`'s (and its DAG test_pipeline's)
    import yaml

    study = yaml.safe_load((ROOT / "config" / "track.yaml").read_text())
    study["defaults"]["epochs"], study["seeds"] = 2, [0]
    config = tmp_path / "track.yaml"
    config.write_text(yaml.safe_dump(study))
    monkeypatch.chdir(ROOT)
    out = tmp_path / "history"
    assert bench_main(["track", "--parts", "perf,study", "--perf-only", "b", "--out", str(out), "--config",
                       str(config), "--cells", "choco-sign_ring8", "--quiet"]) == 0
    (path,) = records(out)
    rec = json.loads(path.read_text())
    assert rec["errors"] == [] and set(rec["perf"]["figures"]) >= {"b.round_vs_copy_sign", "b.round_seconds_sign"}
    assert all(len(f["values"]) >= 2 for f in rec["perf"]["figures"].values())
    cell = rec["study"]["cells"]["choco-sign_ring8"]
    assert cell["seeds"] == [0] and cell["status"] == ["completed"]
    assert all(0.3 < acc < 1 for acc in cell["final_test_acc"])
    assert all(isinstance(e, float) or e == "inf" for e in cell["epochs_to_target"])


def test_commits_are_measured_each_in_a_worktree_of_its_own(tmp_path, checkout, fake_perf, capsys):
    (checkout / "bench" / "__init__.py").write_text("x = 2\n")
    git(checkout, "commit", "-q", "-am", "second commit")
    out = tmp_path / "history"
    argv = ["track", "--repo", str(checkout), "--out", str(out), "--parts", "perf", "--quiet",
            "--commits", "HEAD~1,HEAD"]
    assert bench_main(argv) == 0
    found = [json.loads(p.read_text()) for p in records(out)]
    assert sorted(r["subject"] for r in found) == ["commit 0", "second commit"]
    assert all(r["dirty"] is False for r in found)
    assert len({repo for repo, _ in fake_perf}) == 2 and checkout.resolve() not in {repo for repo, _ in fake_perf}
    assert git(checkout, "worktree", "list").count("\n") == 0  # the worktrees are gone
    # a range, resumed: what is measured is skipped
    assert bench_main([*argv[:-1], "HEAD~1..HEAD", "--skip-measured"]) == 0
    assert len(records(out)) == 2 and "already measured" not in capsys.readouterr().err


def test_settle_waits_for_the_load_to_fall_to_one_per_core_and_no_longer_than_asked(monkeypatch):
    monkeypatch.setattr(track.quickset.os, "cpu_count", lambda: 2)
    said = []
    falling = iter([3.5, 2.6, 1.9, 1.0])
    assert track.settle(60, said.append, poll=0, load=lambda: (next(falling),)) == 1.9  # stops at 2 = 1 x 2 cores
    assert len(said) == 1 and "load average 3.50 above 2" in said[0]
    calls = []
    busy = lambda: (calls.append(1), 8.0)[1:]  # noqa: E731 - never settles
    assert track.settle(0.05, said.append, poll=0.01, load=busy) == 8.0 and len(calls) >= 2
    quiet = []
    assert track.settle(60, quiet.append, load=lambda: (0.3,)) == 0.3 and not quiet  # nothing to wait for
