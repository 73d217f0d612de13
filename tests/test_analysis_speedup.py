"""The linear speed-up study: crossings and speed-ups on curves with known answers, censored and
diverged targets, LR regimes sharing their n = 1 runs, the figure, the report section."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from analysis import report
from analysis.figures import speedup as speedup_figure
from analysis.speedup import (BASELINE_CENSORED, CONSTANT, SHARED, SQRT_N, curves, default_target, lr_regime,
                              ratio_interval, speedup_points, speedup_section, speedup_table, write_speedup_csv)

STEPS = np.arange(0, 129)
METHODS = [("allreduce", "none"), ("dpsgd", "none"), ("choco", "sign")]


def curve_points(algorithm, compressor, nodes, seed, values, status="completed", task="lsq", lr=0.02):
    run_id = f"{task}-{algorithm}-{compressor}-n{nodes}-lr{lr:g}-s{seed}"
    return pd.DataFrame({"step": STEPS[: len(values)], "train_subopt": values, "run_id": run_id, "status": status,
                         "task": task, "algorithm": algorithm, "compressor": compressor, "nodes": nodes,
                         "seed": seed, "topology": "ring" if nodes > 1 else "complete", "lr": lr})


def theory(nodes, c=1.0):
    """f(t) = c/√(n t): reaching ε takes t = c²/(n ε²) iterations, exactly n times fewer than at n = 1."""
    with np.errstate(divide="ignore"):
        return np.where(STEPS > 0, c / np.sqrt(nodes * np.maximum(STEPS, 1)), 10.0)


def planted_regimes(methods=METHODS[:1], nodes=(4, 16, 64)) -> pd.DataFrame:
    """Constant LR: every n follows the n = 1 curve 1/√t (no speed-up). √n LR (capped at n = 64): c/√(n t),
    speed-up n. The n = 1 runs, at the shared LR, are the baseline of both. Two seeds of each method."""
    parts = []
    for (algorithm, compressor), s in itertools.product(methods, range(2)):
        parts.append(curve_points(algorithm, compressor, 1, s, theory(1)))
        for n in nodes:
            parts.append(curve_points(algorithm, compressor, n, s, theory(1)))
            lr = 0.08 if n == 64 else 0.02 * math.sqrt(n)
            parts.append(curve_points(algorithm, compressor, n, s, theory(n), lr=lr))
    return pd.concat(parts, ignore_index=True)


def allreduce(nodes, values, seed=0, **kw):
    return curve_points("allreduce", "none", nodes, seed, values, **kw)


# floors: 0.1 at n = 1 (1/√t < 0.1 after t = 100) and 0.2 at n = 4
PLATEAU = [allreduce(n, np.maximum(theory(n), floor), s) for n, floor in ((1, 0.1), (4, 0.2)) for s in range(2)]
OWN_N1 = [allreduce(1, theory(1)), allreduce(4, theory(4)), allreduce(1, theory(1) * 2, 1, lr=0.5),
          allreduce(4, theory(4) * 2, 1, lr=0.5)]


# (the curves, the target, the row of the table, what it holds); the crossing is tta.first_crossing's
# (tests/test_analysis.py)
@pytest.mark.parametrize("parts, target, at, expected", [
    # a target under a plateau is censored; one under the n = 1 runs' plateau leaves no baseline
    (PLATEAU, 0.15, {"nodes": 4}, {"status": "censored", "reached": 0, "steps_to_target": math.inf,
                                   "speedup": math.nan, "floor_ratio": 0.5}),
    (PLATEAU, 0.05, {"nodes": 4}, {"status": BASELINE_CENSORED, "speedup": math.nan}),
    ([curve_points("dpsgd", "none", 1, 0, theory(1))] + [
        curve_points("dpsgd", "none", 16, s, np.full(5, 1e4), status="diverged") for s in range(3)], 0.125,
     {"nodes": 16}, {"status": "diverged"}),  # diverged, not censored
    # a method without n = 1 runs takes the all-reduce baseline
    ([allreduce(1, theory(1)), curve_points("choco", "sign", 4, 0, theory(4))], 0.125, {"method": "Choco-SGD (sign)"},
     {"speedup": 4.0}),
    # a regime with its own n = 1 runs does not take the shared ones: 64/16 over its own (over the shared: 1)
    (OWN_N1, 0.25, {"lr_regime": "η = 0.5", "nodes": 1}, {"lr": 0.5, "seeds": 1, "shared": False}),
    (OWN_N1, 0.25, {"lr_regime": "η = 0.5", "nodes": 4}, {"speedup": 4.0}),
])
def test_the_speedup_table_on_curves_with_known_answers(parts, target, at, expected):
    table = speedup_table(speedup_points(pd.concat(parts)), target=target, n_boot=20)
    (row,) = [row for _, row in table.iterrows() if all(row[k] == v for k, v in at.items())]
    assert {k: row[k] for k in expected} == pytest.approx(expected, nan_ok=True)


def test_default_target_is_twice_the_n1_allreduce_floor():
    flat = np.concatenate([np.linspace(1, 0.1, 40), np.full(89, 0.01)])
    parts = [curve_points("allreduce", "none", 1, s, flat * (1 + s)) for s in range(3)]
    parts.append(curve_points("dpsgd", "none", 1, 0, flat * 100))  # not all-reduce: ignored
    target, source = default_target(speedup_points(pd.concat(parts)), "lsq")
    assert target == pytest.approx(2 * 0.02) and "all-reduce" in source  # the floor: the last quarter's median


def test_ratio_interval_resamples_both_sides():
    assert ratio_interval([8.0, 8.0], [2.0, 2.0]) == (4.0, 4.0, 4.0)
    point, lo, hi = ratio_interval([60.0, 64.0, 68.0], [15.0, 16.0, 17.0], n_boot=500)
    assert point == 4.0 and 60 / 17 <= lo < 4.0 < hi <= 68 / 15
    assert ratio_interval([64.0], [math.inf])[0] == 0.0


def test_curves_are_medians_over_seeds():
    parts = [curve_points("allreduce", "none", 4, s, np.full(3, v)) for s, v in enumerate([1.0, 2.0, 6.0])]
    out = curves(speedup_points(pd.concat(parts)))
    assert list(out["median"]) == [2.0] * 3 and list(out["low"]) == [1.0] * 3 and list(out["high"]) == [6.0] * 3


def test_the_report_has_a_table_per_regime_at_both_default_targets_and_none_without_n1_runs(tmp_path, monkeypatch):
    points = planted_regimes()
    summary = points.drop_duplicates("run_id").assign(cell=lambda d: d["run_id"], final_test_acc=math.nan,
                                                      network="datacenter-10g", data="shuffle", spectral_gap=0.5)
    monkeypatch.setattr(report, "load_tables", lambda d, with_skipped=False: (points, summary, "", []))
    study = tmp_path / "speedup"
    study.mkdir()
    assert report.main([str(study)]) == 0
    md = (study / "report.md").read_text()
    assert "## Linear speed-up" in md and "speed-up to 2× floor [95% CI]" in md and "1.25× floor" in md
    assert md.count("### lsq: ") == 2 and "constant LR" in md and "√n" in md and "(shared)" in md
    table = pd.read_csv(study / "speedup.csv")
    assert len(table) == 2 * 4 * 2 and set(table["nodes"]) == {1, 4, 16, 64}  # regimes × n × targets
    assert set(table["target_factor"]) == {2.0, 1.25} and set(table["lr_regime"]) == {CONSTANT, SQRT_N}
    # n = 1 all-reduce 1/√t: the floor is the median of the last quarter; each target a factor of it
    floor = float(np.median(theory(1)[-math.ceil(0.25 * len(STEPS)):]))
    assert sorted(set(table["target"])) == pytest.approx([1.25 * floor, 2.0 * floor])
    only_n4 = points[points["nodes"] == 4]
    assert "n = 1" in speedup_figure.draw(tmp_path, only_n4, None, tmp_path / "f")  # the requirement's reason
    assert speedup_section(only_n4) is None and speedup_section(None) is None
    assert write_speedup_csv(only_n4, tmp_path) is None


def test_lr_regime_is_read_off_the_lr_against_the_n1_lr():
    assert lr_regime(0.02, 0.02, 1) == SHARED
    assert lr_regime(0.02, 0.02, 16) == CONSTANT
    assert lr_regime(0.02 * 4, 0.02, 16) == SQRT_N
    assert lr_regime(0.08, 0.02, 64) == SQRT_N  # under 0.02·√64 = 0.16: capped for stability
    assert lr_regime(0.32, 0.02, 4) == "η = 0.32"  # faster than √n: not the theory's regime
    assert lr_regime(math.nan, math.nan, 4) == CONSTANT  # runs without an LR: one regime


def test_speedup_is_computed_within_a_regime_over_the_shared_n1_runs():
    # target 1/8: t = 64/n falls on an evaluation point for every n, so no interpolation error
    table = speedup_table(speedup_points(planted_regimes()), target=0.125, n_boot=100).set_index(["lr_regime",
                                                                                                 "nodes"])
    for n in (4, 16, 64):
        row = table.loc[(SQRT_N, n)]
        assert (row["status"], row["reached"], row["steps_to_target"]) == ("reached", 2, pytest.approx(64 / n))
        assert [row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"]] == pytest.approx([n] * 3)
        assert table.loc[(CONSTANT, n), "speedup"] == pytest.approx(1.0)
        assert table.loc[(CONSTANT, n), "seeds"] == 2 and table.loc[(SQRT_N, n), "seeds"] == 2
    assert table.loc[(SQRT_N, 64), "lr"] == pytest.approx(0.08)
    # the n = 1 runs appear in both regimes, each time once: two seeds, not four
    for regime in (CONSTANT, SQRT_N):
        row = table.loc[(regime, 1)]
        assert row["seeds"] == 2 and row["shared"] and row["speedup"] == pytest.approx(1.0)
    assert not table.loc[(SQRT_N, 4), "shared"]


def test_figure_has_one_curve_panel_per_method_readable_titles_and_the_fitted_constant(tmp_path, monkeypatch):
    from analysis import labels
    from figure_probe import kept_figures

    kept = kept_figures(monkeypatch, speedup_figure)
    points = planted_regimes(METHODS, nodes=(4, 16))
    _, caption = speedup_figure.draw(tmp_path, points, None, tmp_path / "s")
    # c fitted on the tail of the n = 1 all-reduce curve 1/√t (its head, 10 at t = 0, does not move it)
    assert "c = 1 " in caption and "lsq" in caption and "n = 1 all-reduce" in caption
    panels = [ax for ax in kept[0].axes if ax.axison]
    curves_row, ratios_row = panels[:3], panels[3:]
    # three methods × two LR regimes: 3 curve panels and, per regime, speed-up and floor ratio (not 2 × 4)
    assert len(panels) == 3 + 2 * 2
    methods = sorted(speedup_points(points)["method"].unique(), key=labels.method_sort_key)
    assert [ax.get_title() for ax in curves_row] == methods
    # one panel holds both regimes, told apart by line style; the shared n = 1 runs once
    choco = labels.method_label("choco", "sign")
    panel = curves_row[methods.index(choco)]
    styles = {regime: [line.get_linestyle() for line in panel.get_lines()
                       if str(line.get_gid()).startswith(f"curve:{choco}:{regime}:")] for regime in (CONSTANT, SQRT_N)}
    assert len(styles[CONSTANT]) == 3 and len(styles[SQRT_N]) == 2  # n = 1, 4, 16 and n = 4, 16
    assert set(styles[CONSTANT]).isdisjoint(styles[SQRT_N])
    # each ratio panel draws each method's floor ratio (in its look: tests/test_figure_catalog.py)
    assert sum(line.get_gid() == f"floor:{choco}" for ax in ratios_row for line in ax.get_lines()) == 2
