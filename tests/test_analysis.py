"""The analysis package on hand-made runs with known answers: crossings, statuses, targets,
epoch gap, spectral fit, bootstrap, regression verdicts, tolerance of broken runs, CLI codes."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import cli
from analysis.load import load_runs
from analysis.regress import compare, compare_perf, make_baseline
from analysis.summary import cell_summary, epoch_gap, spectral_fit, summarize
from analysis.tta import first_crossing, summarize_seeds, time_to_target
from analysis_fixtures import make_cell, make_run

ROOT = Path(__file__).resolve().parents[1]
TTA = ["time_to_target_s", "epochs_to_target", "bits_to_target", "steps_to_target"]


def test_first_crossing_interpolates_both_directions():
    c = first_crossing([0, 1, 2], [0.1, 0.2, 0.6], 0.5)
    assert c.reached and c.x == pytest.approx(1.75) and c.position == pytest.approx(1.75)
    assert first_crossing([0, 10, 20], [1.0, 0.5, 0.1], 0.3, increasing=False).x == pytest.approx(15.0)
    assert first_crossing([3, 4], [0.9, 0.95], 0.5).x == 3.0
    miss = first_crossing([0, 1], [0.1, float("nan")], 0.5)
    assert not miss.reached and miss.x == math.inf


def test_time_epochs_bits_steps_interpolated_alike(tmp_path):
    # time is not linear in epochs here (a slow second epoch), so time must be read at the crossing
    make_run(tmp_path / "r", steps_per_epoch=10, bits_per_step=1000.0,
             epochs_points=[{"epoch": 0, "test_acc": 0.1, "time_s": 0.0}, {"epoch": 1, "test_acc": 0.2, "time_s": 1.0},
                            {"epoch": 2, "test_acc": 0.6, "time_s": 5.0}])
    runs = load_runs(tmp_path)
    got = time_to_target(runs.points, 0.5)
    assert got["tta_status"] == "reached"
    assert got["epochs_to_target"] == pytest.approx(1.75)
    assert got["steps_to_target"] == pytest.approx(17.5)
    assert got["bits_to_target"] == pytest.approx(17500.0)
    assert got["time_to_target_s"] == pytest.approx(4.0)
    row = summarize(runs, target_acc=0.5).iloc[0]
    assert row["epochs_to_target"] == pytest.approx(1.75) and row["target_source"] == "absolute"
    assert row["bits_per_step"] == pytest.approx(1000.0)


def test_censored_and_diverged_are_inf_with_status_never_nan(tmp_path):
    make_run(tmp_path / "censored", seed=0, epochs_points=[{"epoch": e, "test_acc": a} for e, a in [(0, .1), (1, .3), (2, .4)]])
    make_run(tmp_path / "diverged", seed=1, status="diverged",
             epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": float("nan")}])
    make_run(tmp_path / "late_divergence", seed=2, status="diverged",
             epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": 0.6}, {"epoch": 2, "test_acc": float("nan")}])
    table = summarize(load_runs(tmp_path), target_acc=0.5).set_index("seed")
    assert list(table["tta_status"]) == ["censored", "diverged", "reached"]
    for seed in (0, 1):
        assert all(math.isinf(table.loc[seed, c]) for c in TTA)
    assert table.loc[2, "epochs_to_target"] == pytest.approx(0.8)  # 0.1 -> 0.6 over one epoch
    assert not table[TTA].isna().any().any()
    cells = cell_summary(table.reset_index())
    assert cells[["n_reached", "n_censored", "n_diverged"]].sum().tolist() == [1, 1, 1]


def test_target_rel_uses_best_allreduce_and_says_when_it_falls_back(tmp_path):
    make_run(tmp_path / "ar", algorithm="allreduce", compressor="none",
             epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": 0.8}, {"epoch": 2, "test_acc": 0.7}])
    make_run(tmp_path / "choco", epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": 0.9}])
    make_run(tmp_path / "other", task="digits-mlp",
             epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": 0.6}])
    table = summarize(load_runs(tmp_path), target_rel=0.5).set_index("task")
    mnist = table.loc["mnist1d-mlp"]
    assert mnist["target"].tolist() == pytest.approx([0.4, 0.4])  # 0.5 x 0.8, not 0.5 x 0.9
    assert "all-reduce" in mnist["target_source"].iloc[0] and "no all-reduce" not in mnist["target_source"].iloc[0]
    assert table.loc["digits-mlp", "target"] == pytest.approx(0.3)
    assert "no all-reduce" in table.loc["digits-mlp", "target_source"]
    with pytest.raises(ValueError):
        summarize(load_runs(tmp_path), target_acc=0.5, target_rel=0.9)


def test_epoch_gap_ratio_difference_and_statuses(tmp_path):
    pts = lambda e_hit: [{"epoch": 0, "test_acc": 0.0}, {"epoch": e_hit, "test_acc": 0.5}, {"epoch": 4, "test_acc": 0.6}]
    make_run(tmp_path / "ar", algorithm="allreduce", compressor="none", nodes=8, epochs_points=pts(1.0))
    make_run(tmp_path / "choco", algorithm="choco", nodes=8, epochs_points=pts(1.5))
    make_run(tmp_path / "dcd", algorithm="dcd", nodes=8,
             epochs_points=[{"epoch": 0, "test_acc": 0.0}, {"epoch": 4, "test_acc": 0.3}])
    make_run(tmp_path / "lonely", algorithm="choco", nodes=16, epochs_points=pts(2.0))
    gap = epoch_gap(summarize(load_runs(tmp_path), target_acc=0.5)).set_index(["algorithm", "nodes"])
    assert gap.loc[("choco", 8), "epoch_ratio"] == pytest.approx(1.5)
    assert gap.loc[("choco", 8), "epoch_difference"] == pytest.approx(0.5)
    assert gap.loc[("choco", 8), "gap_status"] == "ok"
    assert gap.loc[("dcd", 8), "gap_status"] == "method_unreached" and math.isinf(gap.loc[("dcd", 8), "epoch_ratio"])
    assert gap.loc[("choco", 16), "gap_status"] == "no_reference"


def test_epoch_gap_counts_seeds_not_network_presets(tmp_path):
    # one seed of Choco under three network presets: epochs do not depend on the network, so it is 1 seed
    pts = lambda e_hit: [{"epoch": 0, "test_acc": 0.0}, {"epoch": e_hit, "test_acc": 0.5}, {"epoch": 4, "test_acc": 0.6}]
    make_run(tmp_path / "ar", algorithm="allreduce", compressor="none", epochs_points=pts(1.0))
    for network in ("datacenter-10g", "ethernet-1g", "wan-100m"):
        make_run(tmp_path / f"choco-{network}", network=network, epochs_points=pts(1.5))
    for seed, hit in ((0, 2.0), (1, 3.0)):
        make_run(tmp_path / f"dcd-{seed}", algorithm="dcd", seed=seed, epochs_points=pts(hit))
    gap = epoch_gap(summarize(load_runs(tmp_path), target_acc=0.5)).set_index("algorithm")
    assert gap.loc["choco", "n_seeds"] == 1 and gap.loc["choco", "epoch_ratio"] == pytest.approx(1.5)
    assert gap.loc["dcd", "n_seeds"] == 2 and gap.loc["dcd", "epochs_to_target"] == pytest.approx(2.5)
    assert gap.loc["choco", "allreduce_n_seeds"] == 1


def _power_law(n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.logspace(-2, 0, n)
    return pd.DataFrame({"spectral_gap": x, "final_gap": 3 * x ** -2.0 * np.exp(rng.normal(0, 0.05, n))})


def test_spectral_fit_recovers_power_law_and_ci_shrinks():
    few, many = spectral_fit(_power_law(5), reference_slope=-2.0), spectral_fit(_power_law(40), reference_slope=-2.0)
    for fit in (few, many):
        assert fit["ci_low"] < -2.0 < fit["ci_high"] and fit["reference_in_ci"]
        assert fit["slope"] == pytest.approx(-2.0, abs=0.1)
        assert math.exp(fit["intercept"]) == pytest.approx(3.0, rel=0.15)
    assert (few["n"], many["n"]) == (5, 40)
    assert many["ci_high"] - many["ci_low"] < few["ci_high"] - few["ci_low"]
    table = pd.concat([_power_law(5), pd.DataFrame({"spectral_gap": [0.5, -1.0], "final_gap": [-0.01, 1.0]})])
    assert spectral_fit(table)["n_dropped"] == 2  # a negative gap cannot be on a log axis


def test_bootstrap_median_ci():
    med, lo, hi = summarize_seeds([0.70, 0.72, 0.69, 0.71, 0.73])
    assert med == pytest.approx(0.71) and 0.69 <= lo <= med <= hi <= 0.73 and lo < hi
    assert summarize_seeds([0.5]) == (0.5, 0.5, 0.5)
    assert summarize_seeds([1.0, math.inf, math.inf])[0] == math.inf
    assert summarize_seeds([1.0, 2.0, 3.0, math.nan])[0] == 2.0
    assert summarize_seeds([1.0, 2.0, 5.0]) == summarize_seeds([1.0, 2.0, 5.0])  # seeded


def _baseline(tmp_path, accs=(0.80, 0.81, 0.79)):
    make_cell(tmp_path / "base", "choco", accs)
    make_cell(tmp_path / "base", "ar", (0.85, 0.85, 0.85), algorithm="allreduce", compressor="none")
    table = summarize(load_runs(tmp_path / "base"), target_acc=0.5)
    return json.loads(json.dumps(make_baseline(table, cell_summary(table))))  # must survive JSON


def _current(tmp_path, accs, **kw):
    make_cell(tmp_path / "cur", "choco", accs, **kw)
    make_cell(tmp_path / "cur", "ar", (0.85, 0.85, 0.85), algorithm="allreduce", compressor="none")
    return summarize(load_runs(tmp_path / "cur"), target_acc=0.5)


def test_planted_accuracy_regression_is_caught_and_named(tmp_path):
    table, regressions = compare(_baseline(tmp_path), _current(tmp_path, (0.75, 0.76, 0.74)))
    assert len(regressions) == 1 and "choco|sign|ring" in regressions[0] and "final accuracy" in regressions[0]
    acc = table[(table["check"] == "final_test_acc") & table["cell"].str.contains("choco")].iloc[0]
    assert acc["verdict"] == "regression" and "mann-whitney" in acc["test"]


def test_change_within_noise_passes(tmp_path):
    _, regressions = compare(_baseline(tmp_path), _current(tmp_path, (0.803, 0.807, 0.793)))
    assert regressions == []


def test_bits_per_step_change_is_caught_exactly(tmp_path):
    _, regressions = compare(_baseline(tmp_path), _current(tmp_path, (0.80, 0.81, 0.79), bits_per_step=1000.5))
    assert any("bits per step" in r for r in regressions)


def test_newly_diverged_run_and_missing_cell_are_caught(tmp_path):
    base = _baseline(tmp_path)
    make_cell(tmp_path / "cur", "choco", (0.80, 0.81))
    make_run(tmp_path / "cur" / "choco" / "s2", seed=2, status="diverged", epochs=2.0,
             epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": float("nan")}])
    _, regressions = compare(base, summarize(load_runs(tmp_path / "cur"), target_acc=0.5))
    assert any("newly diverged" in r and "seed 2" in r for r in regressions)
    assert any("allreduce" in r and "missing" in r for r in regressions)


def _perf(median, kind="ratio", higher=True):
    return {"figures": {"speedup": {"min": median, "median": median, "max": median, "unit": "x",
                                    "higher_is_better": higher, "kind": kind}}}


def test_perf_comparison_only_ratios_beyond_tolerance():
    assert compare_perf(_perf(2.0), _perf(1.6))[1]  # 20 % slower
    assert not compare_perf(_perf(2.0), _perf(1.8))[1]  # 10 %: within 15 %
    assert not compare_perf(_perf(2.0, "absolute"), _perf(0.5, "absolute"))[1]
    assert compare_perf(_perf(1.0, higher=False), _perf(1.3, higher=False))[1]


def test_broken_and_unfinished_runs_are_listed_not_fatal(tmp_path):
    make_run(tmp_path / "good")
    make_run(tmp_path / "a" / "b" / "running", seed=1, status="running",
             epochs_points=[{"epoch": 0, "test_acc": 0.1}])
    make_run(tmp_path / "starting", seed=2, status="running", metrics=False)
    make_run(tmp_path / "empty", seed=3, epochs_points=[])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{not json")
    runs = load_runs(tmp_path)
    assert sorted(runs.runs["status"]) == ["completed", "running"]
    reasons = {Path(p).name: r for p, r in runs.problems}
    assert set(reasons) == {"running", "starting", "empty", "broken"}
    assert "in progress" in reasons["running"] and "unreadable" in reasons["broken"]
    assert summarize(runs, target_acc=0.5).set_index("seed").loc[1, "tta_status"] == "censored"


def test_cells_group_seeds_and_name_swept_knobs(tmp_path):
    make_cell(tmp_path, "m0", (0.7, 0.7), momentum=0.0)
    make_cell(tmp_path, "m9", (0.7, 0.7), momentum=0.9)
    make_run(tmp_path / "lr", lr=0.05)
    cells = sorted(set(load_runs(tmp_path).runs["cell"]))
    assert cells == ["mnist1d-mlp|choco|sign|ring|8|shuffle|datacenter-10g|lr=0.05",
                     "mnist1d-mlp|choco|sign|ring|8|shuffle|datacenter-10g|lr=0.1|momentum=0",
                     "mnist1d-mlp|choco|sign|ring|8|shuffle|datacenter-10g|lr=0.1|momentum=0.9"]


def test_cli_exit_codes(tmp_path, capsys, monkeypatch):
    make_cell(tmp_path / "base", "choco", (0.80, 0.81, 0.79))
    make_cell(tmp_path / "cur", "choco", (0.75, 0.76, 0.74))
    assert cli.main(["summarize", str(tmp_path / "base"), "--target-acc", "0.5"]) == 0
    assert pd.read_parquet(tmp_path / "base" / "summary.parquet").shape[0] == 3
    assert (tmp_path / "base" / "cells.csv").is_file()
    assert not list((tmp_path / "base").glob(".*tmp"))
    base = tmp_path / "b.json"
    assert cli.main(["baseline", str(tmp_path / "base"), "--out", str(base), "--target-acc", "0.5"]) == 0
    assert cli.main(["regress", "--baseline", str(base), "--current", str(tmp_path / "base")]) == 0
    capsys.readouterr()
    assert cli.main(["regress", "--baseline", str(base), "--current", str(tmp_path / "cur")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "choco" in err[0] and "final accuracy" in err[0]
    for bad in (["summarize", str(tmp_path / "nope")], ["summarize", str(tmp_path / "base"), "--target-acc", "0.5", "--target-rel", "0.9"],
                ["summarize", str(tmp_path / "base"), "--target-rel", "x"], ["summarize", str(tmp_path / "empty_dir")], []):
        (tmp_path / "empty_dir").mkdir(exist_ok=True)
        assert cli.main(bad) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    p1, p2 = tmp_path / "p1.json", tmp_path / "p2.json"
    p1.write_text(json.dumps(_perf(2.0)))
    p2.write_text(json.dumps(_perf(1.0)))
    assert cli.main(["regress", "--baseline", str(p1), "--current", str(p2)]) == 1
    assert cli.main(["regress", "--baseline", str(p1), "--current", str(tmp_path / "cur")]) == 2
    monkeypatch.setitem(sys.modules, "analysis.report", None)  # an import that fails
    assert cli.main(["report", "x"]) == 2


def test_python_dash_m_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "analysis", "summarize", str(tmp_path / "missing")],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "missing" in proc.stderr


def _local_points(acc_avg, acc_local, std, n, sampled=2):
    """Three evaluations; the last scores all n local models, the others a sample (as bench writes)."""
    return [{"epoch": 0, "test_acc": 0.1, "local_test_acc_mean": 0.1, "local_test_acc_std": 0.0,
             "local_test_acc_min": 0.1, "local_evaluated": sampled},
            {"epoch": 1, "test_acc": 0.4, "local_test_acc_mean": 0.35, "local_test_acc_std": 0.01,
             "local_test_acc_min": 0.3, "local_evaluated": sampled},
            {"epoch": 2, "test_acc": acc_avg, "local_test_acc_mean": acc_local, "local_test_acc_std": std,
             "local_test_acc_min": acc_local - 2 * std, "local_evaluated": n}]


def test_table1_reports_the_local_models_first_and_the_averaged_model_beside(tmp_path):
    from analysis.report import build_report, table1_section
    from analysis.tables import table1_frame

    for seed, (avg, local, std) in enumerate([(0.64, 0.55, 0.02), (0.62, 0.53, 0.04)]):
        make_run(tmp_path / f"choco{seed}", seed=seed, nodes=8, epochs_points=_local_points(avg, local, std, 8))
        make_run(tmp_path / f"dcd{seed}", algorithm="dcd", compressor="qsgd:8", seed=seed, nodes=8,
                 epochs_points=_local_points(0.6, 0.58, 0.01, 8))
    summary = summarize(load_runs(tmp_path), target_acc=0.5)
    assert summary.set_index(["algorithm", "seed"]).loc[("choco", 1), "final_local_acc"] == pytest.approx(0.53)
    local, _ = table1_frame(summary, "final_local_acc")
    # mean ± sd over seeds of the mean over workers, then the sd over workers averaged over seeds
    assert local.loc["sign", "Choco-SGD"] == "54.00 ± 1.41 (workers ± 3.00)"
    averaged, _ = table1_frame(summary)
    assert averaged.loc["sign", "Choco-SGD"] == "63.00 ± 1.41"
    section = table1_section(summary)
    assert section.index("Local models (the paper's metric)") < section.index("Averaged model")
    report = build_report(tmp_path, tables=(load_runs(tmp_path).points, summary, None), skipped=[])
    assert "read on `test_acc`, the averaged model's test accuracy" in report


def test_runs_that_did_not_score_every_worker_have_no_local_table(tmp_path):
    from analysis.report import table1_section

    for algorithm, compressor in [("choco", "sign"), ("dcd", "qsgd:8")]:  # the last evaluation is a sample of 2 of 8
        points = _local_points(0.6, 0.5, 0.02, 2)
        make_run(tmp_path / algorithm, algorithm=algorithm, compressor=compressor, nodes=8, epochs_points=points)
    summary = summarize(load_runs(tmp_path), target_acc=0.5)
    assert summary["final_local_acc"].isna().all()
    section = table1_section(summary)
    assert "Local models" not in section and "the paper's metric is not available" in section


def test_points_keep_the_lr_schedule_and_the_study_is_one_tidy_table(tmp_path):
    """points["lr"] is the schedule's value at each evaluation (the configured LR is lr_config), and
    summarize writes every run × evaluation with its settings to points.parquet."""
    from analysis.cli import main as analysis_main

    schedule = [0.1, 0.05, 0.025, 0.0125]
    make_run(tmp_path / "a", lr=0.1, momentum=0.9, milestones=[1, 2, 3],
             epochs_points=[{"epoch": e, "lr": lr, "test_acc": 0.2 + 0.1 * e} for e, lr in enumerate(schedule)])
    make_run(tmp_path / "b", algorithm="allreduce", compressor="none", lr=0.2, compute_time=0.01)
    runs = load_runs(tmp_path)
    a = runs.points[runs.points["algorithm"] == "choco"]
    assert a["lr"].tolist() == schedule and (a["lr_config"] == 0.1).all()
    assert runs.runs.set_index("algorithm").loc["choco", "lr"] == 0.1
    assert analysis_main(["summarize", str(tmp_path)]) == 0
    tidy = pd.read_parquet(tmp_path / "points.parquet")
    assert len(tidy) == 4 + 3 and tidy["lr"].head(4).tolist() == schedule
    assert set(tidy["method"]) == {"Choco-SGD (sign)", "all-reduce"}
    assert tidy.loc[tidy["algorithm"] == "choco", "momentum"].eq(0.9).all()  # a setting not in the run table
    assert tidy.loc[tidy["algorithm"] == "choco", "milestones"].eq("[1, 2, 3]").all()  # a list, as JSON text
    assert set(tidy["compute_time"]) == {"measured", "0.01"}  # mixed kinds of one setting: text
