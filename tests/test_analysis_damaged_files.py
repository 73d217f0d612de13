"""Damaged files under a results directory, tried as a user would (issues 13, 26). A run whose metrics.parquet or
run.json cannot be read as a run is skipped, with its reason, by every command that reads runs (on stderr,
and in report.md); a table a command reads back (summary.csv, tuned.csv, traces.csv) or a file `regress`
compares that lacks what its readers need is ONE line naming the file, exit status 2. Never a traceback."""
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from analysis import cli, consensus, tuning
from analysis.checks import REQUIRED_METRICS
from analysis.summary import read_summary
from analysis_fixtures import make_cell, make_run
from hostile import assert_refused, fifo


def _metrics(change):
    def damage(run):
        path = run / "metrics.parquet"
        change(pd.read_parquet(path)).to_parquet(path, index=False)
    return damage


def _record(change):
    def damage(run):
        record = json.loads((run / "run.json").read_text())
        change(record)
        (run / "run.json").write_text(json.dumps(record))
    return damage


def _without(*keys):
    """run.json's config without ``keys`` (and the fallbacks analysis reads in their place, as given)."""
    def change(record):
        for key in keys:
            part, _, inner = key.partition(".")
            (record[part] if inner else record["config"]).pop(inner or key)
    return change


DAMAGED_RUNS = {  # run directory -> (how it is damaged, what the reason it is skipped for says)
    # (each required column alone: test_a_study_whose_every_run_lacks_a_column)
    "no-epoch": (_metrics(lambda m: m.drop(columns="epoch")), "lacks column epoch"),
    "only-step": (_metrics(lambda m: m[["step"]]), "lacks columns epoch, test_acc, time_s, bits_per_worker"),
    "time-words": (_metrics(lambda m: m.assign(time_s=["a", "b", "c"])), "column 'time_s' holds"),
    "step-nan": (_metrics(lambda m: m.assign(step=[0.0, np.nan, 20.0])), "column 'step' holds nan in row 2"),
    "step-negative": (_metrics(lambda m: m.assign(step=[0, -1, 20])), "column 'step' holds -1 in row 2"),
    "accuracy-inf": (_metrics(lambda m: m.assign(test_acc=np.inf)), "column 'test_acc' holds inf"),
    "no-rows": (_metrics(lambda m: m.iloc[:0]), "no evaluation points"),
    "no-columns": (_metrics(lambda m: pd.DataFrame(index=m.index)), "no evaluation points"),
    "run-id-column": (_metrics(lambda m: m.assign(run_id="other")), "column 'run_id', which is the run's own"),
    "not-parquet": (lambda run: (run / "metrics.parquet").write_text("PAR1 not really"), "unreadable metrics.parquet"),
    "record-list": (lambda run: (run / "run.json").write_text("[1, 2]"), "run.json holds a JSON list"),
    "record-cut": (lambda run: (run / "run.json").write_text("{"), "unreadable run.json"),
    "no-metrics": (lambda run: (run / "metrics.parquet").unlink(), "no metrics.parquet (status completed)"),
    "status-number": (_record(lambda r: r.update(status=3)), "status is 3, not a string"),
    "weights-list": (_record(lambda r: r["topology"].update(weights=[1])), "topology.weights is [1], not a string"),
    "bits-count-list": (_record(lambda r: r.update(bits_count=["links"])), "bits_count is ['links'], not a string"),
    "spec-list": (_record(lambda r: (_without("compressor")(r), r["compressor"].update(spec=[1]))),
                  "compressor.spec is [1], not a string"),
    "n-word": (_record(lambda r: (_without("nodes")(r), r["topology"].update(n="x"))), "topology.n is 'x'"),
    "lr-word": (_record(lambda r: r["config"].update(lr="fast")), "config.lr is 'fast', not a number"),
    "no-algorithm": (_record(_without("algorithm")), "names no algorithm"),
    "no-nodes": (_record(_without("nodes", "topology.n")), "names no nodes"),
    # wrong types: each was a traceback in some command once (issue 13)
    "config-list": (_record(lambda r: r.update(config=[1, 2])), "no 'config' object in run.json"),
    "nodes-word": (_record(lambda r: r["config"].update(nodes="eight")), "config.nodes is 'eight', not an integer"),
    "seed-list": (_record(lambda r: r["config"].update(seed=[1])), "config.seed is [1], not an integer"),
    "topology-string": (_record(lambda r: r.update(topology="ring")), "topology is 'ring', not an object"),
    "gamma-number": (_record(lambda r: r.update(gamma=0.5)), "gamma is 0.5, not an object"),
    "run-id-list": (_record(lambda r: r.update(run_id=["x"])), "run_id is ['x'], not a string"),
    "accuracy-words": (_metrics(lambda m: m.assign(test_acc=["a", "b", "c"])), "column 'test_acc' holds str values"),
    "step-words": (_metrics(lambda m: m.assign(step=["0", "x", "20"])), "column 'step' holds str values"),
    "epoch-bools": (_metrics(lambda m: m.assign(epoch=[True, False, True])), "column 'epoch' holds bool values"),
    # whole numbers out of range: an int64-overflowing nodes crashed summarize writing the parquet
    "nodes-overflow": (_record(lambda r: r["config"].update(nodes=-2**63 - 1)),
                       f"config.nodes is {-2**63 - 1}, outside 1..4096"),
    "nodes-zero": (_record(lambda r: r["config"].update(nodes=0)), "config.nodes is 0, outside"),
    "seed-huge": (_record(lambda r: r["config"].update(seed=2**40)), f"config.seed is {2**40}, outside"),
}
COMMANDS = {  # name -> argv after the results directory's path is put in for DIR
    "summarize": ["summarize", "DIR", "--target-rel", "0.9"], "claims": ["claims", "DIR"],
    "baseline": ["baseline", "DIR", "--out", "BASE"], "regress": ["regress", "--baseline", "BASE", "--current", "DIR"],
    "figures": ["figures", "DIR"], "report": ["report", "DIR"],
}


def _study(root):
    make_cell(root, "choco", (0.80, 0.81, 0.79))
    make_cell(root, "ar", (0.85, 0.85, 0.85), algorithm="allreduce", compressor="none")
    return root


@pytest.fixture(scope="module")
def damaged_study(tmp_path_factory):
    """(a study with one run per damage beside six good ones, the baseline of the good ones)."""
    root = _study(tmp_path_factory.mktemp("damaged") / "study")
    base = tmp_path_factory.mktemp("clean") / "baseline.json"
    assert cli.main(["baseline", str(root), "--out", str(base), "--target-rel", "0.95"]) == 0
    _record(lambda r: r.pop("run_id"))(root / "choco" / "s0")  # runs still sound (each was a KeyError): kept
    _record(_without("task"))(root / "ar" / "s0")
    for k, (name, (damage, _)) in enumerate(DAMAGED_RUNS.items()):
        damage(make_run(root / "broken" / name, seed=100 + k))
    return root, base


def _run(argv, study, base, capsys):
    argv = [str(study) if a == "DIR" else str(base) if a == "BASE" else a for a in argv]
    capsys.readouterr()
    status = cli.main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return status, out, err


# figures draws every figure, PNG and PDF: `make test` runs it, test-fast does not
@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow) if c == "figures" else c
                                     for c in COMMANDS])
def test_every_command_skips_each_damaged_run_with_its_reason(command, damaged_study, tmp_path, capsys):
    study = shutil.copytree(damaged_study[0], tmp_path / "study")
    base = tmp_path / "baseline.json"
    shutil.copy(damaged_study[1], base) if command == "regress" else None
    status, _, err = _run(COMMANDS[command], study, base, capsys)
    assert status == 0, err  # the six good runs are compared with their own baseline: nothing regressed
    if command == "figures":
        assert (study / "figures" / "accuracy_curves.png").stat().st_size > 1000
        return
    if command == "report":  # report.md lists them (Markdown escapes the underscores)
        listed = (study / "report.md").read_text().split("## Skipped runs", 1)[1].replace("\\", "")
        lines = {name: line for line in listed.splitlines() for name in DAMAGED_RUNS if f"broken/{name}`" in line}
    else:
        lines = {name: line for line in err.splitlines() for name in DAMAGED_RUNS if line.endswith(f"broken/{name}")
                 or f"broken/{name}: " in line}
        assert all(line.startswith("analysis: note: ") for line in err.splitlines() if line.strip()), err
    for name, (_, reason) in DAMAGED_RUNS.items():
        assert name in lines and reason in lines[name], (name, lines.get(name))
    if command == "summarize":  # the good runs and only those
        assert sorted(pd.read_csv(study / "summary.csv")["seed"]) == [0, 0, 1, 1, 2, 2]


def test_a_named_pipe_for_a_file_is_a_damaged_file_not_a_wait(tmp_path, capsys, request):
    """A run.json or a summary.csv that is a named pipe waited forever for a writer."""
    study = _study(tmp_path / "study")
    (make_run(study / "broken" / "pipe", seed=100) / "run.json").unlink()
    fifo(study / "broken" / "pipe" / "run.json", request)
    status, _, err = _run(COMMANDS["summarize"], study, None, capsys)
    assert status == 0 and "broken/pipe: unreadable run.json" in err and "not a plain file" in err, err
    (study / "summary.csv").unlink()
    with pytest.raises(OSError, match="not a plain file"):  # the figures and the report then compute it again
        read_summary(fifo(study / "summary.csv", request))


@pytest.mark.parametrize("column", REQUIRED_METRICS)
@pytest.mark.parametrize("command", ["summarize", "claims", "figures", "report"])
def test_a_study_whose_every_run_lacks_a_column(column, command, tmp_path, capsys):
    study = _study(tmp_path / "study")
    for run in study.rglob("metrics.parquet"):
        _metrics(lambda m: m.drop(columns=column))(run.parent)
    status, out, err = _run(COMMANDS[command], study, None, capsys)
    if command in ("summarize", "claims"):  # nothing to summarize: one line, with an example of why
        assert_refused(status, err, "no readable runs", f"lacks column {column}")
        assert not (study / "summary.csv").exists() and not (study / "claims.csv").exists()
    elif command == "figures":  # every figure says why it is not drawn
        assert status == 0 and "no readable runs" in out and not list((study / "figures").glob("*.png"))
    else:
        report = (study / "report.md").read_text().replace("\\", "")
        assert status == 0 and "No training runs to summarize" in report
        assert report.count(f"lacks column {column}") == 6


SUMMARY_DAMAGE = {  # how a stored summary.csv is damaged -> what the one line says
    "other columns": (lambda s: pd.DataFrame({"a": [1], "b": [2]}), "lacks columns run_id, path, status"),
    "no status": (lambda s: s.drop(columns="status"), "lacks column status"),
    "no seed or target": (lambda s: s.drop(columns=["seed", "target"]), "lacks columns seed, target"),
    "no rows": (lambda s: s.iloc[:0], "has no rows"),
    "seed NaN": (lambda s: s.assign(seed=np.nan), "column 'seed' holds nan in row 1, not a whole number"),
    "seed huge": (lambda s: s.assign(seed=1e300), "column 'seed' holds 1e+300 in row 1, not a whole number"),
    "nodes word": (lambda s: s.assign(nodes="eight"), "column 'nodes' holds 'eight' in row 1, not a whole number"),
    "accuracy word": (lambda s: s.assign(final_test_acc="high"), "column 'final_test_acc' holds 'high', not a number"),
    "status number": (lambda s: s.assign(status=3), "column 'status' holds 3, not text"),
    "status empty": (lambda s: s.assign(status=np.nan), "column 'status' is empty in row 1"),
}


@pytest.fixture
def summarized(tmp_path):
    study = _study(tmp_path / "study")
    assert cli.main(["summarize", str(study), "--target-rel", "0.9"]) == 0
    return study


READS_SUMMARY = {"claims": "claims.csv", "figures": "figures/index.json", "report": "report.md"}  # -> what it writes
# figures reads the summary before it draws anything: one figure drawn shows the mended study is read again
# (every figure of a damaged study is test_every_command_skips_each_damaged_run_with_its_reason's)
ARGV_OF_SUMMARY_READERS = {**COMMANDS, "figures": ["figures", "DIR", "--only", "accuracy_curves"]}
# summarize computes summary.csv from the runs and never reads the one there, so its mend is the same whatever the
# damage: each reader reads the mended summary after a damage of a different kind
MENDED = {"claims": "no status", "figures": "seed NaN", "report": "accuracy word"}


@pytest.mark.parametrize("command", READS_SUMMARY)
@pytest.mark.parametrize("damage", SUMMARY_DAMAGE)
def test_commands_refuse_a_summary_csv_they_cannot_read(damage, command, summarized, capsys):
    change, words = SUMMARY_DAMAGE[damage]
    path = summarized / "summary.csv"
    change(pd.read_csv(path)).to_csv(path, index=False)
    before = path.read_bytes()
    status, _, err = _run(ARGV_OF_SUMMARY_READERS[command], summarized, None, capsys)
    line = assert_refused(status, err, str(path), words, f"python -m analysis summarize {summarized}")
    assert line.startswith("analysis: error: ")
    written = summarized / READS_SUMMARY[command]
    assert path.read_bytes() == before and not written.exists()  # nothing written, nothing lost
    if damage == MENDED[command]:  # what the line says to do mends it: the reader writes its output
        assert cli.main(["summarize", str(summarized), "--target-rel", "0.9"]) == 0
        assert _run(ARGV_OF_SUMMARY_READERS[command], summarized, None, capsys)[0] == 0 and written.is_file()


@pytest.mark.parametrize("command", ["claims", "report"])
@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe" * 50], ids=["empty", "binary"])
def test_a_summary_csv_that_is_not_csv_is_computed_again(content, command, summarized, capsys):
    (summarized / "summary.csv").write_bytes(content)
    status, out, err = _run([command, "DIR"], summarized, None, capsys)
    assert status == 0 and not err.strip() and (summarized / READS_SUMMARY[command]).is_file()
    assert command == "claims" or "Choco-SGD (sign)" in (summarized / "report.md").read_text()


def _tuned(study):
    """STUDY/tuned.csv as ``tune table`` writes it: one cell, three learning rates, the middle one selected."""
    rows = [{"cell": "c", "trial": f"t{i}", "status": "completed", "task": "mnist1d-mlp", "algorithm": "choco",
             "compressor": "sign", "topology": "ring", "nodes": 8, "data": "shuffle", "lr": lr, "weight_decay": 0.0,
             "gamma": 0.5, "momentum": 0.0, "epochs": 2.0, "epochs_done": 2.0, "val_fraction": 0.1,
             "criterion": "val_acc", "val_acc": acc, "val_ppl": np.nan, "val_loss": 1 - acc, "selected": i == 1}
            for i, (lr, acc) in enumerate([(0.01, 0.5), (0.1, 0.7), (1.0, 0.6)])]
    pd.DataFrame(rows, columns=tuning.COLUMNS).to_csv(study / "tuned.csv", index=False)
    return study / "tuned.csv"


def _damage(path, change) -> None:
    """``change`` applied to the CSV table at ``path``; ``None``: bytes that are no CSV at all."""
    path.write_bytes(b"\x00\xff" * 40) if change is None else change(pd.read_csv(path)).to_csv(path, index=False)


TUNED_DAMAGE = {  # how tuned.csv is damaged -> what the one line says
    "other columns": (lambda t: pd.DataFrame({"a": [1]}), "lacks columns cell, trial, status"),
    "selected word": (lambda t: t.assign(selected="yes"), "column 'selected' holds 'yes', not True or False"),
    "criterion column": (lambda t: t.assign(criterion="step"), "column 'criterion' holds 'step', not one of val_acc"),
    "not csv": (None, "is not a CSV table"),
}


@pytest.mark.parametrize("damage", TUNED_DAMAGE)
def test_a_damaged_tuned_csv(damage, tmp_path, capsys):
    study = _study(tmp_path / "study")
    path = _tuned(study)
    assert "| c | lr = 0.1 |" in tuning.tuning_markdown(study)  # undamaged, the report has the section
    change, words = TUNED_DAMAGE[damage]
    _damage(path, change)
    status, _, err = _run(["report", "DIR"], study, None, capsys)  # the report's tuning section: one line
    assert_refused(status, err, str(path), words, f"python -m analysis tune table {study}")
    assert not (study / "report.md").exists()
    status, out, err = _run(["figures", "DIR", "--only", "sensitivity"], study, None, capsys)
    assert status == 1 and err.startswith("error: figure sensitivity: ") and words in err


@pytest.mark.parametrize("content", ["[1, 2]", '{"rungs": "x"}', '{"rungs": [{"trials": 3, "epochs": "x"}]}'])
def test_a_damaged_halving_record_leaves_the_trial_count(content, tmp_path):
    study = _study(tmp_path / "study")
    _tuned(study)
    (study / "tune" / "c").mkdir(parents=True)
    (study / "tune" / "c" / "halving.json").write_text(content)
    assert "| c | lr = 0.1 | 0.7 |" in tuning.tuning_markdown(study) and "| 3 | 0 |" in tuning.tuning_markdown(study)


def test_a_label_of_another_type_is_not_a_name(tmp_path, capsys):
    """The method's name comes from its algorithm then (the run itself is sound, so kept)."""
    study = _study(tmp_path / "study")
    for run in (study / "choco").iterdir():
        _record(lambda r: r.update(algorithm={"name": "choco", "label": {"x": 1}}))(run)
    assert _run(["report", "DIR"], study, None, capsys)[0] == 0
    report = (study / "report.md").read_text()
    assert "Choco-SGD (sign)" in report and "Skipped runs" not in report and "{'x': 1}" not in report


def test_a_metric_column_of_text_in_one_run_and_numbers_in_another(tmp_path, capsys):
    """A column bench never wrote is kept, as text where the runs disagree on its type (points.parquet)."""
    study = _study(tmp_path / "study")
    _metrics(lambda m: m.assign(note=["a", "b", "c"]))(study / "choco" / "s0")
    _metrics(lambda m: m.assign(note=[1.0, 2.0, 3.0]))(study / "ar" / "s0")
    assert _run(["summarize", "DIR"], study, None, capsys)[0] == 0
    points = pd.read_parquet(study / "points.parquet")
    assert sorted(points["note"].dropna().unique()) == ["1.0", "2.0", "3.0", "a", "b", "c"]


def _trace(path, method="sign"):
    """A traces.csv as `bench consensus --out` writes it: relative error halving each round."""
    steps = np.arange(0, 30, 5)
    pd.DataFrame({"method": method, "gamma": 0.5, "delta_measured": 0.5, "diverged": False, "topology": "ring",
                  "nodes": 8, "spectral_gap": 0.1, "dim": 10, "seed": 0, "step": steps, "rel_error": 0.5 ** steps,
                  "bits_per_worker": steps * 100.0}).to_csv(path, index=False)
    return path


TRACE_DAMAGE = {  # how a traces.csv is damaged -> what the one line says
    "other columns": (lambda t: pd.DataFrame({"a": [1]}), "lacks columns method, gamma, topology"),
    "error words": (lambda t: t.assign(rel_error="small"), "column 'rel_error' holds 'small', not a number"),
    "no rows": (lambda t: t.iloc[:0], "has no rows"),
    "not csv": (None, "is not a CSV table"),
}


@pytest.mark.parametrize("damage", TRACE_DAMAGE)
def test_a_damaged_consensus_trace(damage, tmp_path, capsys):
    good, bad = _trace(tmp_path / "good.csv", "exact"), _trace(tmp_path / "bad.csv")
    change, words = TRACE_DAMAGE[damage]
    _damage(bad, change)
    assert consensus.main([str(good), str(bad), "--out", str(tmp_path / "out")]) == 2  # python -m analysis.consensus
    assert_refused(2, capsys.readouterr().err, str(bad), words)
    assert not (tmp_path / "out").exists()
    study = _study(tmp_path / "study")  # the claims leave it out, and say the traces are missing
    (study / "consensus" / "sign").mkdir(parents=True)
    shutil.copy(bad, study / "consensus" / "sign" / "traces.csv")
    status, _, err = _run(["claims", "DIR"], study, None, capsys)
    claims = pd.read_csv(study / "claims.csv").set_index("claim")
    assert status == 0 and not err.strip()
    gossip = claims[claims["missing"].fillna("").str.contains("consensus traces")]
    assert len(gossip) and set(gossip["verdict"]) == {"incomplete"}


# every figure drawn (`make test` runs it, test-fast does not): a table pandas reads but the suite refuses, and
# bytes that are no CSV; each damage's line is the tests above's (the figures catch every damage in one place)
@pytest.mark.slow
@pytest.mark.parametrize("tuned,trace", [("other columns", "other columns"), ("not csv", "not csv")])
def test_a_damaged_tuned_csv_and_trace_leave_their_figures_out_and_the_others_are_drawn(tuned, trace, tmp_path,
                                                                                        capsys):
    study = _study(tmp_path / "study")
    path = _tuned(study)
    _damage(path, TUNED_DAMAGE[tuned][0])
    (study / "consensus" / "sign").mkdir(parents=True)
    _damage(_trace(study / "consensus" / "sign" / "traces.csv"), TRACE_DAMAGE[trace][0])
    status, out, err = _run(["figures", "DIR"], study, None, capsys)
    assert status == 0 and f"skipped sensitivity: {path} " in out and TUNED_DAMAGE[tuned][1] in out
    assert "a consensus trace cannot be read" in out + err and not (study / "figures" / "consensus.png").exists()
    assert (study / "figures" / "accuracy_curves.png").is_file()


def test_a_tuning_trial_with_wrong_types_is_left_out(tmp_path):
    cell = tmp_path / "tune" / "cell"
    for seed, lr in enumerate((0.1, 0.05)):
        make_run(cell / f"t{seed}", seed=seed, lr=lr, val_fraction=0.1,
                 epochs_points=[{"epoch": 0, "test_acc": 0.1, "val_acc": 0.1},
                                {"epoch": 1, "test_acc": 0.5, "val_acc": 0.5 + seed / 10}])
    for k, name in enumerate(["config-list", "gamma-number", "run-id-list"]):
        DAMAGED_RUNS[name][0](make_run(cell / name, seed=9 + k, lr=0.2, val_fraction=0.1))
    assert tuning.main(["table", str(tmp_path)]) == 0
    assert sorted(pd.read_csv(tmp_path / "tuned.csv")["trial"]) == ["t0", "t1"]


# ---- files `regress` compares: a baseline of a study, or two perf records -----------------------------------
def _cell_with(**changes):
    def change(baseline):
        next(iter(baseline["cells"].values())).update(changes)
        return baseline
    return change


def _repeat_seeds(baseline):
    cell = next(iter(baseline["cells"].values()))
    cell.update({key: values * 2 for key, values in cell.items() if isinstance(values, list)})
    return baseline


def _perf(median=2.0, **figure):
    return {"figures": {"speedup": {"median": median, "unit": "x", "higher_is_better": True, "kind": "ratio",
                                    **figure}}}


BAD_BASELINES = {  # name -> a good baseline of the study changed (returns the new document), a fragment of the line
    "cells-list": (lambda b: {**b, "cells": [1]}, ""), "cell-string": (lambda b: {**b, "cells": {"c": "x"}}, ""),
    "seeds-string": (_cell_with(seeds="0,1,2"), ""), "status-numbers": (_cell_with(status=[1, 2, 3]), ""),
    "status-short": (_cell_with(status=["completed"]), ""),
    "acc-words": (_cell_with(final_test_acc=["high", "low", "mid"]), ""),
    "bits-dict": (_cell_with(bits_per_step={"a": 1}), ""),
    "tolerance-word": (lambda b: {**b, "tolerances": {"acc_tol": "loose"}}, ""),
    "tolerances-list": (lambda b: {**b, "tolerances": [0.1]}, ""), "metric-number": (lambda b: {**b, "metric": 3}, ""),
    "repeated-seed": (_repeat_seeds, "repeat a seed"),
}
BAD_PERF = {
    "figures-list": {"figures": [1, 2]}, "figure-string": {"figures": {"speedup": "fast"}},
    "median-missing": {"figures": {"speedup": {"kind": "ratio"}}}, "median-word": _perf(median="fast"),
    "higher-word": _perf(higher_is_better="yes"), "list": [1],
}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """(a study of one cell, its baseline)."""
    root = tmp_path_factory.mktemp("compared")
    make_cell(root / "base", "choco", (0.80, 0.81, 0.79))
    assert cli.main(["baseline", str(root / "base"), "--out", str(root / "good.json"), "--target-acc", "0.5"]) == 0
    return root / "base", root / "good.json"


@pytest.mark.parametrize("name,side", [*[(n, "baseline") for n in BAD_BASELINES],
                                       *[(f"perf {n}", side) for n in BAD_PERF for side in ("baseline", "current")]])
def test_a_malformed_file_to_compare_is_one_line_naming_it(name, side, baseline, tmp_path, capsys):
    study, recorded = baseline
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_perf()))
    if name.startswith("perf "):
        bad.write_text(json.dumps(BAD_PERF[name[5:]]))
        files = {"baseline": good, "current": good, side: bad}
    else:
        change, fragment = BAD_BASELINES[name]
        bad.write_text(json.dumps(change(json.loads(recorded.read_text()))))
        files = {"baseline": bad, "current": study}
    status, _, err = _run(["regress", "--baseline", str(files["baseline"]), "--current", str(files["current"])],
                          None, None, capsys)
    assert_refused(status, err, str(bad), "" if name.startswith("perf ") else fragment)


def test_regress_says_what_a_damaged_study_lost_and_a_baseline_out_under_a_file_is_one_line(baseline, tmp_path,
                                                                                              capsys):
    """A seed of the baseline whose run is damaged is missing, a target no longer reached and a cell the baseline
    lacks are said, a baseline without a target compares no times; nothing raised (well-formed files still compare:
    tests/test_analysis.py::test_cli_exit_codes)."""
    study, recorded = baseline
    current = tmp_path / "current"
    make_cell(current, "choco", (0.3, 0.3, 0.3))  # the baseline's target, accuracy 0.5, is no longer reached
    make_cell(current, "ar", (0.85, 0.85, 0.85), algorithm="allreduce", compressor="none")
    (current / "choco" / "s0" / "metrics.parquet").write_bytes(b"PAR1")  # skipped: seed 0 missing (a crash once)
    status, out, err = _run(["regress", "--baseline", str(recorded), "--current", "DIR"], current, None, capsys)
    assert status == 1 and "seed 0 missing" in err and "unreadable metrics.parquet" in err
    assert "target no longer reached" in err and "new (not in baseline)" in out
    assert cli.main(["baseline", str(study), "--out", str(tmp_path / "untimed.json")]) == 0  # no target: no times
    assert cli.main(["regress", "--baseline", str(tmp_path / "untimed.json"), "--current", str(study)]) == 0
    afile = tmp_path / "notes.txt"
    afile.write_text("keep me\n")
    status, _, err = _run(["baseline", str(study), "--out", str(afile / "b.json")], None, None, capsys)
    assert_refused(status, err, str(afile))
    assert afile.read_text() == "keep me\n"
