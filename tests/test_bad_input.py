"""Bad input from a hostile review (issue 13): every case ends with exit status 2 and ONE line on
stderr naming the bad value and what is allowed, no traceback, and nothing already written lost;
values that used to be accepted and did the wrong thing are refused the same way."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from analysis import cli as analysis_cli
from analysis import report as analysis_report
from analysis_fixtures import make_cell, make_run
from bench.cli import main
from hostile import assert_refused, bomb, run_cli

ROOT = Path(__file__).resolve().parents[1]
# a run of a few seconds: least squares, 4 workers, one epoch, no γ tuning
FAST = ["--task", "lsq", "--nodes", "4", "--epochs", "1", "--seed", "1", "--quiet"]


def _bench(argv, capsys):
    """(status, stderr) of ``bench ARGV`` in this process; an escaping exception fails the test."""
    status, _, err = run_cli(main, argv, capsys)
    return status, err


def _bench_process(argv, timeout=60):
    """(status, stderr) of ``python -m bench ARGV`` in a child, for cases that used to hang."""
    try:
        proc = subprocess.run([sys.executable, "-m", "bench", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bench {' '.join(argv)[:80]} still running after {timeout} s")
    return proc.returncode, proc.stderr


def _tree(path: Path) -> dict:
    """Every file under ``path`` and its bytes: to show nothing written was lost or changed."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# ---- bench run: settings -----------------------------------------------------------------------
CONFIG_FILES = {  # name -> (bytes of the config file, words the error line must hold)
    "yaml-syntax": (b"lr: [1,\n", ["bad.yaml", "YAML"]),
    "binary": (bytes(range(256)) * 4, ["bad.yaml", "UTF-8"]),
    "non-string-key": (b"1: 2\nlr: 0.1\n", ["bad.yaml", "1"]),
    "null-key": (b"~: 2\n", ["bad.yaml", "None"]),
    "task-options-list": (b"task_options: [1, 2]\n", ["task_options", "mapping"]),
    "task-options-int-key": (b"task_options: {1: 2}\n", ["task_options", "1"]),
    "alias-bomb": (f"network: {bomb()}\n".encode(), ["bad.yaml", "alias"]),
    "merge-key": (b"base: &b {lr: 0.1}\n<<: *b\n", ["bad.yaml", "alias"]),
}


BOMBS = ("alias-bomb",)  # expanded until memory ran out once: in a child process, under a timeout


@pytest.mark.parametrize("name", CONFIG_FILES)
def test_a_bad_config_file_is_one_line_naming_it(name, tmp_path, capsys):
    """In this process, but an alias bomb in a child (~2 s of imports), bounded by its timeout."""
    content, words = CONFIG_FILES[name]
    config = tmp_path / "bad.yaml"
    config.write_bytes(content)
    out = tmp_path / "run"
    argv = ["run", *FAST, "--config", str(config), "--set", "task_options.n_train=64", "--out", str(out)]
    assert_refused(*(_bench_process(argv, timeout=60) if name in BOMBS else _bench(argv, capsys)), *words)
    assert not out.exists()


def test_a_config_that_is_a_directory_or_missing_is_one_line(tmp_path, capsys):
    assert_refused(*_bench(["run", *FAST, "--config", str(tmp_path), "--out", str(tmp_path / "r")], capsys),
             str(tmp_path), "directory")
    assert_refused(*_bench(["run", *FAST, "--config", str(tmp_path / "no.yaml"), "--out", str(tmp_path / "r")], capsys),
             "no.yaml", "does not exist")


@pytest.mark.parametrize("item,words,child", [
    ("lr=[1,", ["lr=[1,", "YAML"], False),
    ("task_options.hidden={a: 1", ["task_options.hidden", "YAML"], False),
    ("task_options.hidden=[&a 1, *a]", ["task_options.hidden", "alias"], False),
    pytest.param(f"network={bomb()}", ["network", "alias"], True, marks=pytest.mark.slow),  # the file's is fast
], ids=["syntax", "unclosed-mapping", "alias", "alias-bomb"])
def test_a_bad_set_value_is_one_line_naming_it(item, words, child, tmp_path, capsys):
    """In this process, but the alias bomb in a child process, bounded by its timeout."""
    out = tmp_path / "run"
    argv = ["run", *FAST, "--set", item, "--out", str(out)]
    assert_refused(*(_bench_process(argv, timeout=60) if child else _bench(argv, capsys)), *words)
    assert not out.exists()


BAD_SETTINGS = [  # (arguments added to FAST, words the error line must hold)
    # infinite or NaN lengths and cadences: used to end in an OverflowError traceback
    (["--epochs", "inf"], ["epochs=inf", "finite"]),
    (["--set", "epochs=.nan"], ["epochs=nan", "finite"]),
    (["--set", "eval_every=.inf"], ["eval_every=inf", "finite"]),
    (["--set", "eval_every=nan"], ["eval_every=nan", "finite"]),
    (["--set", "checkpoint_every=.inf"], ["checkpoint_every=inf", "finite"]),
    (["--set", "warmup_epochs=.inf"], ["warmup_epochs=inf", "finite"]),
    (["--set", "milestones=[1, .nan]"], ["milestones", "finite"]),
    (["--set", "dist_timeout=.nan"], ["dist_timeout=nan", "finite"]),  # used to be accepted
    (["--set", "nodes=.inf"], ["nodes=inf", "integer"]),
    # seeds: numpy takes 0 .. 2^32 - 1 only
    (["--seed", "-1"], ["seed=-1", ">= 0"]),
    (["--set", "seed=4294967296"], ["seed=4294967296", "<="]),
    # devices torch cannot parse
    (["--device", "cuda:x"], ["cuda:x", "cuda:N"]),
    (["--device", "tpu"], ["tpu", "cpu"]),
    (["--set", "device=cuda:-1"], ["cuda:-1"]),
    # more workers than a mixing matrix can be built for
    (["--nodes", "10000000"], ["nodes=10000000", "4096"]),
    # the flags are plain text, typed by the settings: what --set refuses, a flag refuses with the same line
    (["--nodes", "four"], ["nodes='four'", "integer"]),
    (["--batch-size", "0.5"], ["batch_size='0.5'", "integer"]),
    (["--epochs", "ten"], ["epochs='ten'", "number"]),
    # accepted but wrong: true is not a batch size of 1, a loss bound must be > 0, NaN is not negative
    (["--set", "batch_size=true"], ["batch_size=True", "integer"]),
    (["--set", "nodes=false"], ["nodes=False", "integer"]),
    (["--set", "lr=true"], ["lr=True", "number"]),
    (["--set", "divergence_loss=-1"], ["divergence_loss=-1", "> 0"]),
    (["--set", "divergence_loss=0"], ["divergence_loss=0", "> 0"]),
    (["--set", "lr=nan"], ["lr=nan", "finite"]),
    (["--lr", "inf"], ["lr=inf", "finite"]),
    (["--set", "gamma=.nan"], ["gamma=nan"]),
    # the network: a collective cannot ride a broadcast medium; unknown media and send orders
    (["--algorithm", "allreduce", "--compressor", "none", "--set", "network=edge-10m,medium=broadcast"],
     ["medium=broadcast", "allreduce", "medium=links"]),
    (["--algorithm", "ef", "--compressor", "sign", "--set", "network=edge-10m,medium=broadcast"],
     ["medium=broadcast", "'ef'"]),
    (["--set", "network=edge-10m,medium=wifi"], ["medium='wifi'", "links, broadcast"]),
    (["--set", "network=edge-10m,sends=burst"], ["sends='burst'", "serial, parallel"]),
]


@pytest.mark.parametrize("extra,words", BAD_SETTINGS, ids=[" ".join(extra) for extra, _ in BAD_SETTINGS])
def test_a_bad_setting_is_refused_before_anything_is_written(extra, words, tmp_path, capsys):
    out = tmp_path / "run"
    line = assert_refused(*_bench(["run", *FAST, *extra, "--out", str(out)], capsys), *words)
    assert "negative" not in line  # lr=nan used to be called a negative learning rate
    assert not out.exists()


# ---- bench run: the output directory -----------------------------------------------------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished FAST run (run.json and metrics.parquet), copied by the tests that damage it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    proc = subprocess.run([sys.executable, "-m", "bench", "run", *FAST, "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def _interrupted(finished: Path, where: Path) -> Path:
    """A copy of a finished run that looks interrupted: run.json says running, so a checkpoint is loaded."""
    shutil.copytree(finished, where)
    record = json.loads((where / "run.json").read_text())
    (where / "run.json").write_text(json.dumps({**record, "status": "running"}))
    return where


def _good_checkpoint() -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save({"fingerprint": "x", "algo": {"x": torch.zeros(4, 50)}, "task": {},
                "generator": torch.zeros(5000, dtype=torch.uint8), "counters": {"global_step": 3}}, buffer)
    return buffer.getvalue()


CHECKPOINTS = {
    "empty": b"",
    "truncated": _good_checkpoint()[:700],
    "garbage": b"\x00\x01 not a checkpoint \xff" * 40,
    "not-a-dict": None,  # torch.save([1, 2]): readable, but not a checkpoint
    "missing-keys": None,  # torch.save({"fingerprint": ...}): no state
}


@pytest.mark.parametrize("kind", list(CHECKPOINTS))
def test_a_damaged_checkpoint_names_the_file_and_how_to_restart(kind, finished_run, tmp_path, capsys):
    out = _interrupted(finished_run, tmp_path / "run")
    checkpoint = out / "checkpoint.pt"
    if kind == "not-a-dict":
        torch.save([1, 2], checkpoint)
    elif kind == "missing-keys":
        fingerprint = json.loads((out / "run.json").read_text())["fingerprint"]
        torch.save({"fingerprint": fingerprint}, checkpoint)
    else:
        checkpoint.write_bytes(CHECKPOINTS[kind])
    before = _tree(out)
    assert_refused(*_bench(["run", *FAST, "--out", str(out)], capsys), str(checkpoint), "remove")
    assert _tree(out) == before  # the metrics, run.json and even the damaged checkpoint are kept
    checkpoint.unlink()  # and, as the line says, without it the same command starts again
    assert _bench(["run", *FAST, "--out", str(out)], capsys)[0] == 0
    assert json.loads((out / "run.json").read_text())["status"] == "completed"


@pytest.mark.parametrize("command", ["run", "consensus"])
def test_an_out_that_is_a_file_or_under_one_is_one_line(command, tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("keep me\n")
    args = FAST if command == "run" else ["--methods", "exact", "--nodes", "4", "--dim", "10", "--steps", "5",
                                          "--quiet"]
    assert_refused(*_bench([command, *args, "--out", str(afile)], capsys), str(afile), "not a directory")
    assert_refused(*_bench([command, *args, "--out", str(afile / "sub")], capsys), str(afile), "not a directory")
    assert afile.read_text() == "keep me\n"


def test_a_permission_error_is_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    # root ignores file modes, so the OS refusal a user would meet is raised by hand
    import bench.run

    locked = tmp_path / "locked"

    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied", str(locked / "run.json"))

    monkeypatch.setattr(bench.run, "start", refuse)  # what `bench run` calls
    assert_refused(*_bench(["run", *FAST, "--out", str(locked)], capsys), str(locked / "run.json"), "Permission denied")


# ---- the γ cache ---------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", bytes(range(256)), b'{"ring|4": "fast"}'])
def test_a_corrupt_gamma_cache_names_the_file(content, tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("CHOCO_BENCH_CACHE", str(cache))  # never the session's shared cache
    (cache / "gamma.json").write_bytes(content)
    out = tmp_path / "run"
    argv = ["run", *FAST, "--compressor", "top:0.5", "--set", "gamma_tune_steps=5", "--out", str(out)]
    assert_refused(*_bench(argv, capsys), str(cache / "gamma.json"), "remove")
    assert (cache / "gamma.json").read_bytes() == content
    assert not (out / "run.json").exists()


def test_a_gamma_cache_value_that_is_not_a_number_names_the_file(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("CHOCO_BENCH_CACHE", str(cache))
    argv = ["run", *FAST, "--compressor", "top:0.5", "--set", "gamma_tune_steps=5", "--out", str(tmp_path / "a")]
    assert _bench(argv, capsys)[0] == 0
    entries = json.loads((cache / "gamma.json").read_text())
    (cache / "gamma.json").write_text(json.dumps({k: "fast" for k in entries}))
    argv[-1] = str(tmp_path / "b")
    assert_refused(*_bench(argv, capsys), str(cache / "gamma.json"), "fast")


# ---- other commands ------------------------------------------------------------------------------
OTHER_COMMANDS = [  # (argv, words the error line must hold)
    (["topology", "--topology", "ring", "--nodes", "10000000"], ["10000000", "4096"]),
    (["topology", "--topology", "random-regular:3", "--nodes", "8", "--seed", "-1"], ["-1", ">= 0"]),
    (["tune-gamma", "--compressor", "sign", "--nodes", "10000000"], ["10000000", "4096"]),
    (["consensus", "--methods", "exact", "--nodes", "10000000"], ["10000000", "4096"]),
    (["tune-gamma", "--compressor", "sign", "--seed", "-3"], ["-3", ">= 0"]),
    # accepted but wrong: an empty log grid silently became the default grid
    (["tune-gamma", "--compressor", "sign", "--grid", "0:1:0"], ["0:1:0", "COUNT", ">= 1"]),
    (["tune-gamma", "--compressor", "sign", "--grid=-3:0:2.5"], ["-3:0:2.5"]),
    (["tune-gamma", "--compressor", "sign", "--grid=-3:inf:4"], ["-3:inf:4", "finite"]),
    (["tune-gamma", "--compressor", "sign", "--grid", "0.1,,0.5"], ["0.1,,0.5"]),
    (["perf", "--device", "tpu", "--quick"], ["tpu", "cpu"]),
    (["plan", "--configfile", "config/smoke.yaml", "--device", "cuda:x"], ["cuda:x", "auto"]),
]


@pytest.mark.parametrize("argv,words", OTHER_COMMANDS, ids=[" ".join(argv) for argv, _ in OTHER_COMMANDS])
def test_other_commands_refuse_in_one_line(argv, words):
    # a child process: 10^7 nodes used to build for minutes
    assert_refused(*_bench_process(argv, timeout=60), *words)


# ---- analysis -------------------------------------------------------------------------------------
def _damage_record(path: Path, change) -> None:
    record = json.loads((path / "run.json").read_text())
    change(record)
    (path / "run.json").write_text(json.dumps(record))


def _damage_metrics(path: Path, column: str, values) -> None:
    metrics = pd.read_parquet(path / "metrics.parquet")
    metrics[column] = values
    metrics.to_parquet(path / "metrics.parquet", index=False)


BROKEN_RUNS = {  # directory name -> how its files are damaged
    "config-list": lambda p: _damage_record(p, lambda r: r.update(config=[1, 2])),
    "nodes-word": lambda p: _damage_record(p, lambda r: r["config"].update(nodes="eight")),
    "seed-list": lambda p: _damage_record(p, lambda r: r["config"].update(seed=[1])),
    "topology-string": lambda p: _damage_record(p, lambda r: r.update(topology="ring")),
    "gamma-number": lambda p: _damage_record(p, lambda r: r.update(gamma=0.5)),
    "status-number": lambda p: _damage_record(p, lambda r: r.update(status=3)),
    "run-id-list": lambda p: _damage_record(p, lambda r: r.update(run_id=["x"])),
    "acc-words": lambda p: _damage_metrics(p, "test_acc", ["a", "b", "c"]),
    "step-words": lambda p: _damage_metrics(p, "step", ["0", "x", "20"]),
    "epoch-bools": lambda p: _damage_metrics(p, "epoch", [True, False, True]),
}


@pytest.fixture
def study_with_broken_runs(tmp_path):
    make_cell(tmp_path, "choco", (0.80, 0.81, 0.79))
    make_cell(tmp_path, "ar", (0.85, 0.85, 0.85), algorithm="allreduce", compressor="none")
    for k, (name, damage) in enumerate(BROKEN_RUNS.items()):
        damage(make_run(tmp_path / "broken" / name, seed=100 + k))
    return tmp_path


def test_one_bad_run_does_not_stop_a_summary(study_with_broken_runs, capsys):
    study = study_with_broken_runs
    assert analysis_cli.main(["summarize", str(study), "--target-acc", "0.5"]) == 0
    table = pd.read_csv(study / "summary.csv")
    assert len(table) == 6 and set(table["seed"]) == {0, 1, 2}
    err = capsys.readouterr().err
    for name in BROKEN_RUNS:
        assert name in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["figures"], ["report"], ["baseline", "--out", "b.json"]])
def test_every_analysis_command_skips_bad_runs(command, study_with_broken_runs, capsys):
    study = study_with_broken_runs
    argv = [command[0], str(study), *[str(study / a) if a.endswith(".json") else a for a in command[1:]]]
    assert analysis_cli.main(argv) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_the_report_lists_the_runs_it_skipped(study_with_broken_runs):
    study = study_with_broken_runs
    assert analysis_report.main([str(study)]) == 0
    report = (study / "report.md").read_text()
    assert "## Skipped runs" in report
    skipped = report.split("## Skipped runs", 1)[1]
    for name in BROKEN_RUNS:
        assert name in skipped
    assert "choco/s0" not in skipped  # the good runs are in the tables, not here


def test_a_report_without_bad_runs_has_no_skipped_section(tmp_path):
    make_cell(tmp_path, "choco", (0.80, 0.81, 0.79))
    assert analysis_report.main([str(tmp_path)]) == 0
    assert "Skipped runs" not in (tmp_path / "report.md").read_text()


def _baseline(tmp_path) -> dict:
    make_cell(tmp_path / "base", "choco", (0.80, 0.81, 0.79))
    out = tmp_path / "good.json"
    assert analysis_cli.main(["baseline", str(tmp_path / "base"), "--out", str(out), "--target-acc", "0.5"]) == 0
    return json.loads(out.read_text())


def _cell_with(baseline: dict, **changes) -> dict:
    """``baseline`` with ``changes`` made to its first cell."""
    next(iter(baseline["cells"].values())).update(changes)
    return baseline


BAD_BASELINES = {  # name -> change of a good baseline (returns the new document)
    "list": lambda b: [1, 2],
    "cells-list": lambda b: {**b, "cells": [1]},
    "cell-string": lambda b: {**b, "cells": {"c": "x"}},
    "seeds-string": lambda b: _cell_with(b, seeds="0,1,2"),
    "seeds-words": lambda b: _cell_with(b, seeds=["a", "b", "c"]),
    "status-numbers": lambda b: _cell_with(b, status=[1, 2, 3]),
    "status-short": lambda b: _cell_with(b, status=["completed"]),
    "acc-words": lambda b: _cell_with(b, final_test_acc=["high", "low", "mid"]),
    "bits-dict": lambda b: _cell_with(b, bits_per_step={"a": 1}),
    "tolerance-word": lambda b: {**b, "tolerances": {"acc_tol": "loose"}},
    "tolerances-list": lambda b: {**b, "tolerances": [0.1]},
    "targets-list": lambda b: {**b, "targets": [0.5]},
    "metric-number": lambda b: {**b, "metric": 3},
}


@pytest.mark.parametrize("name", list(BAD_BASELINES))
def test_a_malformed_baseline_is_one_line_naming_the_file(name, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(BAD_BASELINES[name](_baseline(tmp_path))))
    capsys.readouterr()
    status = analysis_cli.main(["regress", "--baseline", str(bad), "--current", str(tmp_path / "base")])
    assert_refused(status, capsys.readouterr().err, str(bad))


def _perf(median=2.0, **figure):
    return {"figures": {"speedup": {"median": median, "unit": "x", "higher_is_better": True, "kind": "ratio",
                                    **figure}}}


BAD_PERF = {
    "figures-list": {"figures": [1, 2]},
    "figure-string": {"figures": {"speedup": "fast"}},
    "median-missing": {"figures": {"speedup": {"kind": "ratio"}}},
    "median-word": _perf(median="fast"),
    "median-nan-string": _perf(median="NaN-ish"),
    "higher-word": _perf(higher_is_better="yes"),
    "list": [1],
}


@pytest.mark.parametrize("side", ["baseline", "current"])
@pytest.mark.parametrize("name", list(BAD_PERF))
def test_a_malformed_perf_file_is_one_line_naming_it(name, side, tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_perf()))
    bad.write_text(json.dumps(BAD_PERF[name]))
    files = {"baseline": good, "current": good, side: bad}
    status = analysis_cli.main(["regress", "--baseline", str(files["baseline"]), "--current", str(files["current"])])
    assert_refused(status, capsys.readouterr().err, str(bad))


def test_well_formed_files_still_compare(tmp_path):
    _baseline(tmp_path)
    assert analysis_cli.main(["regress", "--baseline", str(tmp_path / "good.json"),
                              "--current", str(tmp_path / "base")]) == 0
    p1, p2 = tmp_path / "p1.json", tmp_path / "p2.json"
    p1.write_text(json.dumps(_perf(2.0)))
    p2.write_text(json.dumps(_perf(1.0)))
    assert analysis_cli.main(["regress", "--baseline", str(p1), "--current", str(p2)]) == 1


def test_a_baseline_out_under_a_file_is_one_line(tmp_path, capsys):
    make_cell(tmp_path / "base", "choco", (0.80, 0.81, 0.79))
    afile = tmp_path / "notes.txt"
    afile.write_text("keep me\n")
    status = analysis_cli.main(["baseline", str(tmp_path / "base"), "--out", str(afile / "b.json")])
    assert_refused(status, capsys.readouterr().err, str(afile))
    assert afile.read_text() == "keep me\n"


def test_a_damaged_summary_csv_is_recomputed_not_fatal(tmp_path):
    make_cell(tmp_path, "choco", (0.80, 0.81, 0.79))
    (tmp_path / "summary.csv").write_bytes(b"\x00\xff\xfe" * 50)
    assert analysis_report.main([str(tmp_path)]) == 0
    assert "Choco-SGD (sign)" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("name", ["config-list", "gamma-number", "run-id-list"])
def test_a_tuning_trial_with_wrong_types_is_left_out(name, tmp_path):
    from analysis import tuning

    cell = tmp_path / "tune" / "cell"
    for seed, lr in enumerate((0.1, 0.05)):
        make_run(cell / f"t{seed}", seed=seed, lr=lr, val_fraction=0.1,
                 epochs_points=[{"epoch": 0, "test_acc": 0.1, "val_acc": 0.1}, {"epoch": 1, "test_acc": 0.5,
                                                                                  "val_acc": 0.5 + seed / 10}])
    BROKEN_RUNS[name](make_run(cell / "broken", seed=9, lr=0.2, val_fraction=0.1))
    assert tuning.main(["table", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "tuned.csv")
    assert sorted(table["trial"]) == ["t0", "t1"]


@pytest.mark.parametrize("command", ["consensus", "tune-gamma"])
@pytest.mark.parametrize("args,words", [
    (["--dim", "99999999999"], ["--dim", "16777216"]),
    (["--steps", "10000000"], ["--steps", "1000000"]),
    (["--nodes", "4096", "--dim", "100000"], ["--nodes 4096 x --dim 100000", "2 GiB"]),
])
def test_consensus_sizes_beyond_memory_or_patience_are_refused(command, args, words, tmp_path, capsys):
    extra = ["--compressor", "sign"] if command == "tune-gamma" else ["--out", str(tmp_path / "c")]
    assert_refused(*_bench([command, *args, *extra], capsys), *words)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("key,value", [("nodes", -9223372036854775809), ("nodes", 0), ("seed", 2**40)])
def test_a_run_json_with_a_whole_number_out_of_range_is_left_out_not_fatal(key, value, tmp_path, capsys):
    """Found by the property test: an int64-overflowing nodes used to crash summarize writing the parquet."""
    make_run(tmp_path / "good", seed=1)
    bad = make_run(tmp_path / "bad", seed=2)
    record = json.loads((bad / "run.json").read_text())
    record["config"][key] = value
    (bad / "run.json").write_text(json.dumps(record))
    assert analysis_cli.main(["summarize", str(tmp_path), "--target-acc", "0.5"]) == 0
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 1
    assert f"config.{key} is {value}" in capsys.readouterr().err
