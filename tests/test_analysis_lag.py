"""Consensus distance during training against the final gap to centralized training: the per-run
summary, the per-setting table, the power-law fit with its intervals, the figure and the report."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis import report
from analysis.figures import lag_vs_consensus
from analysis.lag import fit_band, fit_lag, lag_fits, lag_table, training_consensus, write_tables
from analysis.load import load_runs
from analysis.summary import summarize
from analysis_fixtures import make_cell, make_run
from figure_probe import kept_figures


def planted(rng, a=2.0, b=0.7, sigma=0.15, k=12):
    x = np.geomspace(1e-3, 1.0, k)
    return pd.DataFrame({"consensus": x, "gap": a * x ** b * np.exp(rng.normal(0.0, sigma, k))})


def test_the_fit_recovers_a_planted_power_law_and_its_intervals_cover_the_truth():
    fit = fit_lag(planted(np.random.default_rng(0)))
    assert fit["a_ci_low"] < 2.0 < fit["a_ci_high"] and fit["r2"] > 0.9 and fit["spearman_p"] < 1e-3
    # the band of the fitted mean holds the true curve at the centre of the data
    centre, lo, hi = fit_band(fit, [0.03])
    assert lo[0] < 2.0 * 0.03 ** 0.7 < hi[0] and lo[0] < centre[0] < hi[0]


def test_the_slope_interval_has_its_nominal_coverage():
    rng = np.random.default_rng(1)
    covered = sum(fit["ci_low"] < 0.7 < fit["ci_high"]
                  for fit in (fit_lag(planted(rng, sigma=0.3, k=8)) for _ in range(400)))
    assert 0.91 <= covered / 400 <= 0.985


X4 = np.array([1e-3, 1e-2, 1e-1, 1.0])


@pytest.mark.parametrize("consensus, gap, expected", [
    # no noise: the fit is exact and the interval collapses
    (X4, 3.0 * X4 ** 1.5, {"slope": 1.5, "a": 3.0, "ci_width": 0.0, "r2": 1.0}),
    # gaps <= 0 leave the log fit but count in the rank correlation: 1 - 6·(0+0+4+0+4)/(5·24)
    ([1e-3, 1e-2, 1e-1, 1.0, 10.0], [-0.5, 0.0, 4.0, 2.0, 1.0], {"n": 3, "n_dropped": 2, "n_ranked": 5,
                                                                  "spearman": 0.6, "falls": True}),
    # the semi-log fit keeps every setting: gaps -1, 1, 3, 5
    (X4, 5.0 + 2.0 * np.log10(X4), {"n": 3, "n_dropped": 1, "n_ranked": 4, "k_decade": 2.0, "k_ci_width": 0.0}),
])
def test_the_fit_on_relations_with_known_answers(consensus, gap, expected):
    fit = fit_lag(pd.DataFrame({"consensus": consensus, "gap": gap}))
    fit = {**fit, "ci_width": fit["ci_high"] - fit["ci_low"], "k_ci_width": fit["k_ci_high"] - fit["k_ci_low"],
           "falls": fit["slope"] < 0}
    assert {k: fit[k] for k in expected} == pytest.approx(expected, abs=1e-9)


def test_one_distinct_consensus_value_cannot_be_fitted():
    with pytest.raises(ValueError, match="at least 2 distinct"):
        fit_lag(pd.DataFrame({"consensus": [0.1, 0.1, 0.1], "gap": [1.0, 2.0, 3.0]}))


def test_training_consensus_is_the_time_average_over_the_second_half():
    points = pd.DataFrame({"run_id": "r", "step": [0, 10, 20, 30, 40], "epoch": [0.0, 1, 2, 3, 4],
                           "consensus_distance": [0.0, 9.0, 9.0, 1.0, 3.0]})
    # epochs 2..4 (9, 1, 3): trapezoids (9+1)/2 + (1+3)/2 = 7 over 2 epochs
    assert training_consensus(points)["r"] == pytest.approx(3.5)
    uneven = pd.DataFrame({"run_id": "u", "step": [10, 20, 40], "epoch": [1.0, 2, 4],
                           "consensus_distance": [5.0, 1.0, 1.0]})
    assert training_consensus(uneven)["u"] == pytest.approx(1.0)  # epochs 2 and 4 only


@pytest.fixture(scope="module")
def lag_runs(tmp_path_factory):
    """Gaps 1, 2, 4, 8 pp at consensus 1e-3, 4e-3, 1.6e-2, 6.4e-2: gap = 8·(Ξ/0.064)^0.5 exactly."""
    tmp_path = tmp_path_factory.mktemp("lag")
    for n, acc in ((4, 0.90), (16, 0.90)):
        make_cell(tmp_path, f"ar{n}", [acc, acc], [0.0, 0.0], algorithm="allreduce", compressor="none",
                  topology="complete", nodes=n, spectral_gap=1.0)
    settings = [("ring", 4, 0.89, 1e-3, 0.67), ("torus", 16, 0.88, 4e-3, 0.4), ("ring", 16, 0.86, 1.6e-2, 0.05)]
    for topology, n, acc, cd, rho in settings:
        make_cell(tmp_path, f"choco_{topology}{n}", [acc, acc], [cd, cd], topology=topology, nodes=n,
                  spectral_gap=rho)
    make_cell(tmp_path, "dpsgd_ring16", [0.82, 0.82], [6.4e-2, 6.4e-2], algorithm="dpsgd", compressor="none",
              nodes=16, spectral_gap=0.05)
    # a diverged seed is left out of the medians, not averaged in
    make_run(tmp_path / "dpsgd_ring16" / "s2", seed=2, algorithm="dpsgd", compressor="none", nodes=16,
             status="diverged", epochs=2, epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": 0.1,
                                                                                  "consensus_distance": 1e3}])
    return tmp_path


def test_lag_table_fit_figure_and_report_on_runs_with_known_answers(lag_runs, monkeypatch):
    runs = load_runs(lag_runs)
    summary = summarize(runs, target_rel=0.95)
    table = lag_table(runs.points, summary).set_index(["algorithm", "topology", "nodes"])
    assert table.loc[("dpsgd", "ring", 16), "seeds"] == 3 and table.loc[("dpsgd", "ring", 16), "diverged"] == 1
    assert table["gap"].to_dict() == pytest.approx({("choco", "ring", 4): 1.0, ("choco", "ring", 16): 4.0,
                                                    ("choco", "torus", 16): 2.0, ("dpsgd", "ring", 16): 8.0})
    assert table.loc[("dpsgd", "ring", 16), "consensus"] == pytest.approx(6.4e-2)
    fits = lag_fits(table.reset_index())
    pooled = fits[fits["scope"] == "all methods"].iloc[0]
    assert pooled["slope"] == pytest.approx(0.5) and pooled["n"] == 4 and pooled["spearman"] == pytest.approx(1.0)
    choco = fits[fits["scope"] == "Choco-SGD (sign)"].iloc[0]  # three settings: a fit of its own
    assert choco["slope"] == pytest.approx(0.5) and choco["n"] == 3
    kept = kept_figures(monkeypatch, lag_vs_consensus)
    _, caption = lag_vs_consensus.draw(lag_runs, runs.points, summary, lag_runs / "figures" / "lag_vs_consensus")
    assert len(kept) == 1 and "b = 0.50" in caption and "4 settings" in caption and "Spearman ρ = 1.00" in caption
    text = report.build_report(lag_runs, (runs.points, summary, None), [])
    assert "## Why decentralized training lags" in text and "0.50 [0.50, 0.50]" in text
    assert [p.name for p in write_tables(lag_runs, runs.points, summary)] == ["lag.csv", "lag_fits.csv"]
    written = pd.read_csv(lag_runs / "lag_fits.csv")
    assert math.isclose(written.loc[written["scope"] == "all methods", "slope"].iloc[0], 0.5)


def test_figure_tells_topology_and_a_gap_below_zero_apart(tmp_path, monkeypatch):
    from matplotlib.colors import to_rgba

    kept = kept_figures(monkeypatch, lag_vs_consensus)
    # ring at n = 4 and 16 (both in the fit), complete at n = 16 with gap ≤ 0 (out of the log fit)
    table = pd.DataFrame({"task": "t", "data": "shuffle", "method": "Choco-SGD (sign)",
                          "topology": ["ring", "ring", "complete", "complete"], "nodes": [4, 16, 16, 4],
                          "consensus": [1e-3, 1e-2, 2e-3, 5e-3], "gap": [1.0, 3.0, -0.5, 2.0]})
    lag_vs_consensus.plot_lag_vs_consensus(table, tmp_path / "f")
    faces = {c.get_gid(): to_rgba(c.get_facecolor()[0]) for c in kept[0].axes[0].collections if c.get_gid()}
    white = to_rgba("white")
    assert faces.pop("unfitted:complete:16") == white
    assert set(faces) == {"fitted:ring:4", "fitted:ring:16", "fitted:complete:4"} and white not in faces.values()
