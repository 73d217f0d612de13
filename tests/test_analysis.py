"""The analysis package on hand-made runs with known answers: crossings, statuses, targets,
epoch gap, spectral fit, bootstrap, regression verdicts, tolerance of broken runs, CLI codes."""
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import cli, consensus
from analysis.load import load_runs
from analysis.regress import compare, compare_perf, make_baseline
from analysis.summary import cell_summary, epoch_gap, spectral_fit, summarize
from analysis.tta import first_crossing, summarize_seeds, time_to_target
from analysis_fixtures import make_cell, make_run, page_data

TTA = ["time_to_target_s", "epochs_to_target", "bits_to_target", "steps_to_target"]
INF, NAN = math.inf, math.nan
AR = {"algorithm": "allreduce", "compressor": "none"}


def acc(*pairs):
    """Evaluation points of (epoch, test accuracy) pairs."""
    return [{"epoch": e, "test_acc": a} for e, a in pairs]


@pytest.mark.parametrize("kind, x, y, target, increasing, at, position", [
    ("accuracy", [0, 1, 2], [0.1, 0.2, 0.6], 0.5, True, 1.75, 1.75),  # linear between the two points around it
    ("accuracy", [0, 10, 20], [1.0, 0.5, 0.1], 0.3, False, 15.0, 1.5),  # a loss: downwards
    ("accuracy", [3, 4], [0.9, 0.95], 0.5, True, 3.0, 0.0),  # reached at the first point
    ("accuracy", [0, 1], [0.1, NAN], 0.5, True, INF, INF),  # never (NaN never reaches): inf, not NaN
    # in log error (halfway, never: test_consensus_summary_statuses_rounds_and_bits_to_the_error)
    ("consensus", [5, 10], [1e-5, 1e-6], 1e-4, False, 5.0, None),
])
def test_first_crossing_is_interpolated_and_inf_when_never_reached(kind, x, y, target, increasing, at, position):
    if kind == "consensus":
        assert consensus.first_crossing(x, y, target) == pytest.approx(at)
        return
    c = first_crossing(x, y, target, increasing=increasing)
    assert (c.reached, c.x, c.position) == (at != INF, pytest.approx(at), pytest.approx(position))


def test_time_epochs_bits_steps_interpolated_alike(tmp_path):
    # time is not linear in epochs here (a slow second epoch), so time must be read at the crossing
    make_run(tmp_path / "r", steps_per_epoch=10, bits_per_step=1000.0,
             epochs_points=[{"epoch": 0, "test_acc": 0.1, "time_s": 0.0}, {"epoch": 1, "test_acc": 0.2, "time_s": 1.0},
                            {"epoch": 2, "test_acc": 0.6, "time_s": 5.0}])
    runs = load_runs(tmp_path)
    got = time_to_target(runs.points, 0.5)
    assert {k: got[k] for k in ["tta_status", *TTA]} == {
        "tta_status": "reached", "epochs_to_target": pytest.approx(1.75), "steps_to_target": pytest.approx(17.5),
        "bits_to_target": pytest.approx(17500.0), "time_to_target_s": pytest.approx(4.0)}
    row = summarize(runs, target_acc=0.5).iloc[0]
    assert (row["epochs_to_target"], row["target_source"], row["bits_per_step"]) == (
        pytest.approx(1.75), "absolute", pytest.approx(1000.0))


def test_censored_and_diverged_are_inf_with_status_never_nan(tmp_path):
    make_run(tmp_path / "censored", seed=0, epochs_points=acc((0, .1), (1, .3), (2, .4)))
    make_run(tmp_path / "diverged", seed=1, status="diverged", epochs_points=acc((0, .1), (1, NAN)))
    make_run(tmp_path / "late_divergence", seed=2, status="diverged", epochs_points=acc((0, .1), (1, .6), (2, NAN)))
    table = summarize(load_runs(tmp_path), target_acc=0.5).set_index("seed")
    assert list(table["tta_status"]) == ["censored", "diverged", "reached"]
    assert np.isinf(table.loc[[0, 1], TTA].to_numpy()).all() and not table[TTA].isna().any().any()
    assert table.loc[2, "epochs_to_target"] == pytest.approx(0.8)  # 0.1 -> 0.6 over one epoch
    cells = cell_summary(table.reset_index())
    assert cells[["n_reached", "n_censored", "n_diverged"]].sum().tolist() == [1, 1, 1]


def test_consensus_summary_statuses_rounds_and_bits_to_the_error():
    rows = [{"method": method, "gamma": 0.5, "delta_measured": 0.1, "diverged": method == "c", "step": step,
             "rel_error": err, "bits_per_worker": step * 1e6}
            for method, errors in [("a", [1, 1e-3, 1e-5]), ("b", [1, 0.5, 0.1]), ("c", [1, 10, 2e3])]
            for step, err in zip([0, 10, 20], errors)]
    table = consensus.summarize(pd.DataFrame(rows)).set_index("method")
    assert list(table["status"]) == ["reached", "censored", "diverged"]
    assert table.loc["a", ["rounds_to_0.0001", "mbit_to_0.0001", "mbit_per_round"]].tolist() == pytest.approx(
        [15.0, 15.0, 1.0])
    assert math.isinf(table.loc["b", "rounds_to_0.0001"])


def test_target_rel_uses_best_allreduce_and_says_when_it_falls_back(tmp_path):
    make_run(tmp_path / "ar", **AR, epochs_points=acc((0, .1), (1, .8), (2, .7)))
    make_run(tmp_path / "choco", epochs_points=acc((0, .1), (1, .9)))
    make_run(tmp_path / "other", task="digits-mlp", epochs_points=acc((0, .1), (1, .6)))
    table = summarize(load_runs(tmp_path), target_rel=0.5).set_index("task")
    mnist = table.loc["mnist1d-mlp"]
    assert mnist["target"].tolist() == pytest.approx([0.4, 0.4])  # 0.5 x 0.8, not 0.5 x 0.9
    assert "all-reduce" in mnist["target_source"].iloc[0] and "no all-reduce" not in mnist["target_source"].iloc[0]
    assert table.loc["digits-mlp", "target"] == pytest.approx(0.3)
    assert "no all-reduce" in table.loc["digits-mlp", "target_source"]
    pytest.raises(ValueError, summarize, load_runs(tmp_path), target_acc=0.5, target_rel=0.9)  # not both


def test_epoch_gap_ratio_difference_statuses_and_seeds_not_network_presets(tmp_path):
    from analysis.report import slope_text, what_was_run
    hit = lambda e: acc((0, 0.0), (e, 0.5), (4, 0.6))  # noqa: E731
    make_run(tmp_path / "ar", **AR, epochs_points=hit(1.0))
    # one seed of Choco under three network presets: epochs do not depend on the network, so it is 1 seed
    for network in ("datacenter-10g", "ethernet-1g", "wan-100m"):
        make_run(tmp_path / f"choco-{network}", network=network, epochs_points=hit(1.5))
    for seed, e in ((0, 2.0), (1, 3.0)):
        make_run(tmp_path / f"dcd-{seed}", algorithm="dcd", seed=seed, epochs_points=hit(e))
    make_run(tmp_path / "dcd-q", algorithm="dcd", compressor="qsgd:4", epochs_points=acc((0, 0.0), (4, 0.3)))
    make_run(tmp_path / "lonely", nodes=16, epochs_points=hit(2.0))
    make_run(tmp_path / "ar16", **AR, nodes=16, epochs_points=acc((0, 0.0), (2, 0.4), (4, 0.45)))
    gap = epoch_gap(summarize(load_runs(tmp_path), target_acc=0.5)).set_index(["algorithm", "compressor", "nodes"])
    # 0.9 x all-reduce's best (0.54) is out of its reach at n = 16: read there on 0.9 x its best at n = 16
    summary = summarize(load_runs(tmp_path), target_rel=0.9)
    rel = epoch_gap(summary).set_index(["algorithm", "compressor", "nodes"]).loc[("choco", "sign", 16)]
    assert rel[["target", "target_rule", "gap_status"]].tolist() == [pytest.approx(0.405), "setting", "ok"]
    assert rel["epoch_ratio"] == pytest.approx(1.62 / 2.2) and "Node counts: 8, 16." in what_was_run(summary)
    assert slope_text(spectral_fit(_power_law(2))).endswith(" (interval not estimable from 2 points)")  # not ±inf
    choco, dcd = gap.loc[("choco", "sign", 8)], gap.loc[("dcd", "sign", 8)]
    assert (choco["epoch_ratio"], choco["epoch_difference"], choco["gap_status"]) == (pytest.approx(1.5),
                                                                                      pytest.approx(0.5), "ok")
    assert (choco["n_seeds"], choco["allreduce_n_seeds"], dcd["n_seeds"]) == (1, 1, 2)
    assert dcd["epochs_to_target"] == pytest.approx(2.5)
    unreached = gap.loc[("dcd", "qsgd:4", 8)]
    assert unreached["gap_status"] == "method_unreached" and math.isinf(unreached["epoch_ratio"])
    assert gap.loc[("choco", "sign", 16), "gap_status"] == "reference_unreached"


def _power_law(n, seed=0):
    x = np.logspace(-2, 0, n)
    return pd.DataFrame({"spectral_gap": x, "final_gap": 3 * x ** -2.0 * np.exp(
        np.random.default_rng(seed).normal(0, 0.05, n))})


def test_spectral_fit_recovers_power_law_and_ci_shrinks():
    few, many = spectral_fit(_power_law(5), reference_slope=-2.0), spectral_fit(_power_law(40), reference_slope=-2.0)
    for fit in (few, many):
        assert fit["ci_low"] < -2.0 < fit["ci_high"] and fit["reference_in_ci"]
        assert fit["slope"] == pytest.approx(-2.0, abs=0.1)
        assert math.exp(fit["intercept"]) == pytest.approx(3.0, rel=0.15)
    assert many["ci_high"] - many["ci_low"] < few["ci_high"] - few["ci_low"]
    table = pd.concat([_power_law(5), pd.DataFrame({"spectral_gap": [0.5, -1.0], "final_gap": [-0.01, 1.0]})])
    assert spectral_fit(table)["n_dropped"] == 2  # a negative gap cannot be on a log axis


def test_bootstrap_median_ci():
    med, lo, hi = summarize_seeds([0.70, 0.72, 0.69, 0.71, 0.73])
    assert med == pytest.approx(0.71) and 0.69 <= lo <= med <= hi <= 0.73 and lo < hi
    assert summarize_seeds([0.5]) == (0.5, 0.5, 0.5)
    assert summarize_seeds([1.0, INF, INF])[0] == INF
    assert summarize_seeds([1.0, 2.0, 3.0, NAN])[0] == 2.0
    assert summarize_seeds([1.0, 2.0, 5.0]) == summarize_seeds([1.0, 2.0, 5.0])  # seeded


def _cells(root, accs, **kw):
    make_cell(root, "choco", accs, **kw)
    make_cell(root, "ar", (0.85, 0.85, 0.85), **AR)
    return summarize(load_runs(root), target_acc=0.5)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    table = _cells(tmp_path_factory.mktemp("base"), (0.80, 0.81, 0.79))
    return json.loads(json.dumps(make_baseline(table, cell_summary(table))))  # must survive JSON


@pytest.mark.parametrize("accs, kw, caught, count", [
    ((0.75, 0.76, 0.74), {}, "final accuracy", 1),  # a planted drop, by Mann-Whitney
    ((0.803, 0.807, 0.793), {}, None, 0),  # within noise
    ((0.80, 0.81, 0.79), {"bits_per_step": 1000.5}, "bits per step", 2),  # compared exactly (and the paper's)
])
def test_a_planted_regression_is_caught_and_named_and_noise_passes(baseline, tmp_path, accs, kw, caught, count):
    table, regressions = compare(baseline, _cells(tmp_path, accs, **kw))
    assert len(regressions) == count and all("choco|sign|ring" in r and caught in r for r in regressions)
    acc_row = table[(table["check"] == "final_test_acc") & table["cell"].str.contains("choco")].iloc[0]
    assert (acc_row["verdict"] == "regression") == (caught == "final accuracy") and "mann-whitney" in acc_row["test"]


def test_newly_diverged_run_and_missing_cell_are_caught(baseline, tmp_path):
    make_cell(tmp_path, "choco", (0.80, 0.81))
    make_run(tmp_path / "choco" / "s2", seed=2, status="diverged", epochs=2.0, epochs_points=acc((0, .1), (1, NAN)))
    _, regressions = compare(baseline, summarize(load_runs(tmp_path), target_acc=0.5))
    assert any("newly diverged" in r and "seed 2" in r for r in regressions)
    assert any("allreduce" in r and "missing" in r for r in regressions)


def _perf(median, kind="ratio", higher=True):
    return {"figures": {"speedup": {"min": median, "median": median, "max": median, "unit": "x",
                                    "higher_is_better": higher, "kind": kind}}}


@pytest.mark.parametrize("base, current, caught", [
    (_perf(2.0), _perf(1.6), True),  # 20 % slower
    (_perf(2.0), _perf(1.8), False),  # 10 %: within 15 %
    (_perf(2.0, "absolute"), _perf(0.5, "absolute"), False),  # only ratios are compared
    (_perf(1.0, higher=False), _perf(1.3, higher=False), True),
])
def test_perf_comparison_only_ratios_beyond_tolerance(base, current, caught):
    assert bool(compare_perf(base, current)[1]) == caught


def test_broken_and_unfinished_runs_are_listed_not_fatal(tmp_path):
    make_run(tmp_path / "good")
    make_run(tmp_path / "a" / "b" / "running", seed=1, status="running", epochs_points=acc((0, 0.1)))
    make_run(tmp_path / "starting", seed=2, status="running", metrics=False)
    runs = load_runs(tmp_path)  # damaged runs: tests/test_analysis_damaged_files.py
    assert sorted(runs.runs["status"]) == ["completed", "running"]
    reasons = {Path(p).name: r for p, r in runs.problems}
    assert set(reasons) == {"running", "starting"} and "in progress" in reasons["running"]
    assert summarize(runs, target_acc=0.5).set_index("seed").loc[1, "tta_status"] == "censored"


def test_cells_group_seeds_and_name_swept_knobs(tmp_path):
    make_cell(tmp_path, "m0", (0.7, 0.7), momentum=0.0)
    make_cell(tmp_path, "m9", (0.7, 0.7), momentum=0.9)
    make_run(tmp_path / "lr", lr=0.05)
    prefix = "mnist1d-mlp|choco|sign|ring|8|shuffle|datacenter-10g|"
    assert sorted(set(load_runs(tmp_path).runs["cell"])) == [
        prefix + "lr=0.05", prefix + "lr=0.1|momentum=0", prefix + "lr=0.1|momentum=0.9"]


def test_cli_exit_codes(tmp_path, capsys, monkeypatch):
    base, cur = tmp_path / "base", tmp_path / "cur"
    make_cell(base, "choco", (0.80, 0.81, 0.79))
    make_cell(cur, "choco", (0.75, 0.76, 0.74))
    assert cli.main(["summarize", str(base), "--target-acc", "0.5"]) == 0
    assert pd.read_parquet(base / "summary.parquet").shape[0] == 3
    assert (base / "cells.csv").is_file() and not list(base.glob(".*tmp"))
    record = tmp_path / "b.json"
    assert cli.main(["baseline", str(base), "--out", str(record), "--target-acc", "0.5"]) == 0
    assert cli.main(["regress", "--baseline", str(record), "--current", str(base)]) == 0
    capsys.readouterr()
    assert cli.main(["regress", "--baseline", str(record), "--current", str(cur)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "choco" in err[0] and "final accuracy" in err[0]
    (tmp_path / "empty_dir").mkdir()
    p1, p2 = tmp_path / "p1.json", tmp_path / "p2.json"
    p1.write_text(json.dumps(_perf(2.0)))
    p2.write_text(json.dumps(_perf(1.0)))
    assert cli.main(["regress", "--baseline", str(p1), "--current", str(p2)]) == 1
    capsys.readouterr()
    for bad in (["summarize", str(tmp_path / "nope")], ["summarize", str(base), "--target-acc", "0.5", "--target-rel",
                "0.9"], ["summarize", str(base), "--target-rel", "x"], ["summarize", str(tmp_path / "empty_dir")], [],
                ["regress", "--baseline", str(p1), "--current", str(cur)], ["report", str(tmp_path / "nope")],
                ["figures", str(tmp_path / "nope")], ["browse", str(tmp_path / "nope")], ["browse", str(cur)]):
        assert cli.main(bad) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(a in err[0] for a in bad if a.endswith("nope")), (bad, err)  # names it
    monkeypatch.setitem(sys.modules, "analysis.report", None)  # an import that fails
    assert cli.main(["report", "x"]) == 2


def _local_points(acc_avg, acc_local, std, n, sampled=2):
    """Three evaluations; the last scores all n local models, the others a sample (as bench writes)."""
    return [{"epoch": e, "test_acc": a, "local_test_acc_mean": m, "local_test_acc_std": s,
             "local_test_acc_min": m - 2 * s, "local_evaluated": k}
            for e, a, m, s, k in [(0, 0.1, 0.1, 0.0, sampled), (1, 0.4, 0.35, 0.01, sampled),
                                  (2, acc_avg, acc_local, std, n)]]


@pytest.mark.parametrize("scored", [8, 2], ids=["every worker", "a sample"])
def test_table1_reports_the_local_models_first_when_every_worker_was_scored(tmp_path, scored):
    from analysis.report import build_report, table1_section
    from analysis.tables import table1_frame

    for seed, (avg, local, std) in enumerate([(0.64, 0.55, 0.02), (0.62, 0.53, 0.04)]):
        make_run(tmp_path / f"choco{seed}", seed=seed, epochs_points=_local_points(avg, local, std, scored))
        make_run(tmp_path / f"dcd{seed}", algorithm="dcd", compressor="qsgd:8", seed=seed,
                 epochs_points=_local_points(0.6, 0.58, 0.01, scored))
    summary = summarize(load_runs(tmp_path), target_acc=0.5)
    section = table1_section(summary)
    if scored == 2:  # the last evaluation a sample of 2 of 8: no local table
        assert summary["final_local_acc"].isna().all()
        assert "Local models" not in section and "the paper's metric is not available" in section
        return
    assert summary.set_index(["algorithm", "seed"]).loc[("choco", 1), "final_local_acc"] == pytest.approx(0.53)
    # mean ± sd over seeds of the mean over workers, then the sd over workers averaged over seeds
    assert table1_frame(summary, "final_local_acc")[0].loc["sign", "Choco-SGD"] == "54.00 ± 1.41 (workers ± 3.00)"
    assert table1_frame(summary)[0].loc["sign", "Choco-SGD"] == "63.00 ± 1.41"
    assert section.index("Local models (the paper's metric)") < section.index("Averaged model")
    report = build_report(tmp_path, tables=(load_runs(tmp_path).points, summary, None), skipped=[])
    assert "read on `test_acc`, the averaged model's test accuracy" in report


def test_points_keep_the_lr_schedule_and_the_study_is_one_tidy_table_and_one_browser_page(tmp_path):
    """points["lr"] is the schedule's value at each evaluation (the configured LR is lr_config), summarize
    writes every run × evaluation with its settings to points.parquet, and `browse` a page of every study."""
    schedule, study = [0.1, 0.05, 0.025, 0.0125], tmp_path / "study"
    make_run(study / "a", lr=0.1, momentum=0.9, milestones=[1, 2, 3],
             epochs_points=[{"epoch": e, "lr": lr, "test_acc": 0.2 + 0.1 * e} for e, lr in enumerate(schedule)])
    make_run(study / "b", **AR, lr=0.2)
    runs = load_runs(study)
    a = runs.points[runs.points["algorithm"] == "choco"]
    assert a["lr"].tolist() == schedule and (a["lr_config"] == 0.1).all()
    assert runs.runs.set_index("algorithm").loc["choco", "lr"] == 0.1
    assert cli.main(["summarize", str(study)]) == 0 and cli.main(["browse", str(tmp_path)]) == 0
    tidy, page = pd.read_parquet(study / "points.parquet"), (tmp_path / "browser.html").read_text()
    assert {(i["study"], i["run_id"]): i["curves"]["test_acc"] for i in page_data(tmp_path / "browser.html")["items"]} \
        == {("study", run): pytest.approx(list(g["test_acc"] * 100)) for run, g in tidy.groupby("run_id")}
    assert "<script src=" not in page and all(f'id="{c}"' in page for c in ("x-axis", "group-by", "filter-method"))
    assert len(tidy) == 4 + 3 and tidy["lr"].head(4).tolist() == schedule
    assert set(tidy["method"]) == {"Choco-SGD (sign)", "all-reduce"}
    choco = tidy[tidy["algorithm"] == "choco"]
    assert choco["momentum"].eq(0.9).all()  # a setting not in the run table
    assert choco["milestones"].eq("[1, 2, 3]").all()  # a list, as JSON text


def test_summarize_or_baseline_run_by_hand_keeps_the_studys_target(tmp_path, capsys):
    """`python -m analysis summarize DIR`, as the tour lists it, wrote NaN targets over the pipeline's (`--target-rel
    R`): figures and the report then lost every time to target, and the next figure job failed."""
    study = tmp_path / "study"
    make_cell(study, "choco", (0.80, 0.81, 0.79))
    make_cell(study, "ar", (0.85, 0.85, 0.85), **AR)
    assert cli.main(["summarize", str(study), "--target-rel", "0.9"]) == 0  # the pipeline's job
    piped = pd.read_csv(study / "summary.csv")
    for argv in (["summarize", str(study)], ["baseline", str(study), "--out", str(tmp_path / "base.json")]):
        assert cli.main(argv) == 0
    assert "target 0.9 x best all-reduce" in capsys.readouterr().out
    by_hand = pd.read_csv(study / "summary.csv")
    assert by_hand["target"].tolist() == piped["target"].tolist() == [0.9 * 0.85] * 6
    assert {c["target"] for c in json.loads((tmp_path / "base.json").read_text())["cells"].values()} == {0.9 * 0.85}
    (study / "summary.csv").unlink()  # no summary yet: the pipeline's default
    assert cli.main(["summarize", str(study)]) == 0
    assert set(pd.read_csv(study / "summary.csv")["target_source"]) == {"0.95 x best all-reduce"}


def test_measured_times_taken_on_a_busy_machine_are_flagged_and_an_unrecorded_share_is_unknown(tmp_path, capsys):
    """run.json's timing.others_cpu_share (bench/run/busy.py) per run and, the most of a cell's runs, per cell in
    summary.csv; summarize names the busy cells on stderr and the report beside the times. A run recorded before the
    share is unknown (never quiet); a modelled compute time is not doubted."""
    for name, share, kw in [("busy0", 0.1, {}), ("busy1", 0.6, {"seed": 1}), ("quiet", 0.05, {"algorithm": "dpsgd"}),
                            ("old", None, {"algorithm": "dcd"}), ("modelled", None, {**AR, "compute_time": 0.01})]:
        make_run(tmp_path / name, timing=None if share is None else {"others_cpu_share": share}, **kw)
    assert cli.main(["summarize", str(tmp_path), "--target-acc", "0.5"]) == 0
    cells = pd.read_csv(tmp_path / "summary.csv").groupby("algorithm")["cell_others_cpu_share"]
    assert cells.max().dropna().to_dict() == pytest.approx({"choco": 0.6, "dpsgd": 0.05}) and cells.count().sum() == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of 4 cells" in err[0] and "busy" in err[0] and "60%" in err[0] and "|choco|" in err[0]
    from analysis.report import build_report

    report = build_report(tmp_path, skipped=[])
    note = report[report.index("## Per cell"):report.index("| method")]  # beside the times, none for dpsgd's or AR's
    words = ("busy machine", "\\|choco\\|", "not known", "\\|dcd\\|", "dpsgd", "allreduce")
    assert [note.count(w) for w in words] == [1, 1, 1, 1, 0, 0]
