"""Runs on an unreliable network (run.json "faults"): their columns in the run table, their cells, and the
faults_effect figure drawn from a hand-made study with known answers, checked on the drawn Axes (that it draws
or says why, and its looks: tests/test_figure_catalog.py)."""
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from analysis.figures import faults_effect
from analysis.figures.faults_effect import NO_FAULTS
from analysis.figures import requirements as req
from analysis.labels import method_label
from analysis.load import load_runs
from analysis.summary import load_tables
from analysis_fixtures import make_run
from figure_probe import kept_figures

NODES = 16
DECENTRALIZED = {("dpsgd", "none"): (0.90, 0.5), ("choco", "sign"): (0.88, 0.2)}
DROPS = [0.0, 0.01, 0.05, 0.2]
BURSTY = [0.05, 0.2]
MEANS = [0.25, 1.0, 4.0]
TOPOLOGY_COST = {"ring": 0.02, "exponential": 0.0}
GAP = {"ring": 0.051, "exponential": 0.33}


def local_acc(method, topology, drop, bursts, seed):
    """The final mean accuracy of the workers' own models: lower with more losses, lower still in bursts."""
    base, slope = DECENTRALIZED[method]
    return base - TOPOLOGY_COST[topology] - slope * drop - (0.03 if bursts else 0.0) + 0.004 * seed


def run(root, name, algorithm, compressor, topology, seed, final_local, faults=None, seconds_per_epoch=2.0):
    """Five evaluations rising linearly to ``final_local`` (the averaged model 2 points above it), every
    worker's own model scored at the last."""
    final_test = final_local + 0.02
    pts = [{"epoch": e, "test_acc": 0.1 + (final_test - 0.1) * e / 4,
            "local_test_acc_mean": 0.1 + (final_local - 0.1) * e / 4, "local_evaluated": NODES if e == 4 else 4}
           for e in range(5)]
    return make_run(root / f"{name}_s{seed}", algorithm=algorithm, compressor=compressor, topology=topology,
                    nodes=NODES, seed=seed, epochs_points=pts, faults=faults, messages_per_step=32.0,
                    seconds_per_epoch=seconds_per_epoch,
                    spectral_gap=1.0 if algorithm == "allreduce" else GAP[topology])


def fault_study(root):
    """The faults study in small, two seeds: losses (independent and in bursts) on two graphs, stragglers on the
    ring, all-reduce as the reference on a perfect network and with stragglers."""
    losses = [(d, "drop", {"drop": d}) for d in DROPS] + [
        (d, "ge", {"drop": d, "drop_model": "gilbert-elliott", "burst": 8}) for d in BURSTY]
    for method, topology, seed, (drop, model, faults) in itertools.product(DECENTRALIZED, TOPOLOGY_COST, (0, 1),
                                                                           losses):
        run(root, f"{'-'.join(method)}_{topology}_{model}{drop}", *method, topology, seed,
            local_acc(method, topology, drop, model == "ge", seed), faults=faults)
    for seed, mean in itertools.product((0, 1), [0.0] + MEANS):
        slow = {"straggler": {"model": "exponential", "mean": mean}} if mean else None
        run(root, f"allreduce_m{mean}", "allreduce", "none", "ring", seed, 0.90 + 0.004 * seed, faults=slow,
            seconds_per_epoch=2.0 * (1 + mean))
        for method in [("dpsgd", "none"), ("choco", "sign")] if mean else []:
            # Choco with the worst stragglers ends below the target: censored
            final = 0.70 if (method[1], mean) == ("sign", 4.0) else local_acc(method, "ring", 0.0, False, seed)
            run(root, f"{'-'.join(method)}_m{mean}", *method, "ring", seed, final, faults=slow,
                seconds_per_epoch=2.0 * (1 + mean))
    return load_tables(root)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    points, summary, _ = fault_study(root)
    return root, points, summary


def drawn(monkeypatch, root, points, summary, tmp_path):
    """The figure's panels by title, kept open instead of saved, and its caption."""
    kept = kept_figures(monkeypatch, faults_effect)
    _, caption = faults_effect.draw(root, points, summary, tmp_path / "faults_effect")
    return {ax.get_title(): ax for ax in kept[0].axes if ax.get_title()}, caption


def by_gid(ax, gid):
    return [a for a in ax.get_lines() if a.get_gid() == gid]


@pytest.fixture(scope="module")
def figure(study, tmp_path_factory):
    """The study's figure, drawn once: its panels by title and its caption."""
    with pytest.MonkeyPatch.context() as patch:
        return drawn(patch, *study, tmp_path_factory.mktemp("figure"))


# -- the run table ------------------------------------------------------------------------------------------------
NAN = math.nan
EXPONENTIAL, FIXED = {"model": "exponential", "mean": 0.5}, {"model": "fixed", "workers": [1], "factor": 4}
RUNS = {  # run folder: (make_run's arguments, what the run table says of its network)
    "old": ({}, {"drop": 0.0, "drop_model": "none", "straggler_mean": 0.0, "outages": 0, "burst": NAN,
                 "dropped_share": NAN, "perfect": True}),  # before faults: no key, no message counts
    "ge": ({"messages_per_step": 100, "dropped_share": 0.052, "faults": {"drop": 0.05, "drop_model": "gilbert-elliott",
                                                                         "burst": 8}},
           {"drop": 0.05, "drop_model": "gilbert-elliott", "burst": 8.0, "dropped_share": 0.052}),  # 104 of 2000
    "slow": ({"messages_per_step": 10, "faults": {"straggler": EXPONENTIAL}},
             {"drop_model": "none", "straggler_mean": 0.5, "dropped_share": 0.0}),
    "fixed": ({"faults": {"straggler": FIXED}}, {"straggler_mean": NAN, "straggler_factor": 4.0}),
    # late messages, pairwise gossip or workers away are neither the perfect network's point nor a loss rate
    "late": ({"faults": {"late": 0.2, "staleness": 2}},
             {"late": 0.2, "staleness": 2.0, "active": 1.0, "pairwise": False, "perfect": False, "lossy": False}),
    "pair": ({"faults": {"pairwise": True}}, {"pairwise": True, "perfect": False, "lossy": False}),
    "away": ({"faults": {"drop": 0.05, "active": 0.5}}, {"active": 0.5, "perfect": False, "lossy": False}),
    "plain": ({"faults": {"drop": 0.05}}, {"perfect": False, "lossy": True}),
    "perfect": ({"faults": {}}, {"perfect": True, "lossy": False}),
}


def test_a_runs_faults_are_its_columns_and_its_cell_also_against_an_older_run(tmp_path):
    for seed, (folder, (given, _)) in enumerate(RUNS.items()):
        make_run(tmp_path / folder, algorithm="dpsgd", compressor="none", seed=seed, **given)
    loaded = load_runs(tmp_path)
    assert not loaded.skipped
    runs = loaded.runs.set_index(loaded.runs["path"].map(lambda p: Path(p).name))
    runs = runs.assign(perfect=req.perfect(runs), lossy=req.lossy(runs))
    for folder, (_, said) in RUNS.items():
        for column, value in said.items():
            assert runs.loc[folder, column] == pytest.approx(value, nan_ok=True), (folder, column)
    # runs that differ only in faults are different cells; a run from before faults ran on a perfect network
    assert runs["cell"].nunique() == len(RUNS) - 1 and runs.loc["old", "cell"] == runs.loc["perfect", "cell"]


# -- the figure ---------------------------------------------------------------------------------------------------
@pytest.mark.slow  # draws the figure: `make test` runs it, test-fast does not
def test_losses_panel_draws_each_methods_median_at_each_drop_rate_and_bursts_apart(figure):
    panels, caption = figure
    assert list(panels) == ["(a) ring: accuracy against lost messages", "(b) exponential: accuracy against lost "
                            "messages", "(c) ring: time to target against stragglers"]  # one letter each
    for topology, letter in zip(TOPOLOGY_COST, "ab"):
        ax = panels[f"({letter}) {topology}: accuracy against lost messages"]
        assert ax.get_xlim()[0] < 0 < ax.get_xlim()[1] and ax.get_xscale() == "symlog"
        assert sorted(ax.get_xticks()) == [d * 100 for d in DROPS]
        for method, (model, drops, style) in itertools.product(DECENTRALIZED, [("independent", DROPS, "-"),
                                                                               ("bursts", BURSTY, "--")]):
            (line,) = by_gid(ax, f"loss:{method_label(*method)}:{model}")
            want = [100 * np.median([local_acc(method, topology, d, model == "bursts", s) for s in (0, 1)])
                    for d in drops]
            assert list(line.get_xdata()) == [d * 100 for d in drops] and np.allclose(line.get_ydata(), want)
            assert line.get_linestyle() == style  # bursts dashed (in each method's colour: the figure catalog)
            shift = line.get_transform().transform((20, 50))[0] - ax.transData.transform((20, 50))[0]
            assert abs(shift) <= faults_effect.SPREAD * ax.figure.dpi / 72  # beside its tick, not at 12 %
        (ref,) = by_gid(ax, "reference")
        assert np.allclose(ref.get_ydata(), 100 * np.median([0.90, 0.904]))
    assert "own model" in caption and "median over 2 seeds per point" in caption and "Gilbert-Elliott" in caption
    assert "0, 1, 5, 20%" in caption and "measured shares lost" in caption


@pytest.mark.slow  # draws the figure: `make test` runs it, test-fast does not
def test_straggler_panel_draws_time_to_target_against_the_straggler_mean(study, figure):
    (_, _, summary), (panels, caption) = study, figure
    assert "(d) exponential: time to target against stragglers" not in panels  # stragglers ran on the ring
    ax = panels["(c) ring: time to target against stragglers"]
    assert sorted(ax.get_xticks()) == [0.0] + MEANS and ax.get_xlim()[0] < 0
    s = summary.assign(method=[method_label(a, c) for a, c in zip(summary["algorithm"], summary["compressor"])])
    for label in [method_label("allreduce", "none"), method_label("dpsgd", "none"), method_label("choco", "sign")]:
        (line,) = by_gid(ax, f"straggler:{label}")
        mine = s[(s["method"] == label) & (s["topology"] == "ring") & (s["drop"] == 0)]
        want = mine[mine["tta_status"] == "reached"].groupby("straggler_mean")["time_to_target_s"].median()
        assert list(line.get_xdata()) == list(want.index) and np.allclose(line.get_ydata(), want.to_numpy())
    assert list(by_gid(ax, f"straggler:{method_label('choco', 'sign')}")[0].get_xdata()) == [0.0, 0.25, 1.0]
    (mark,) = by_gid(ax, f"unreached:{method_label('choco', 'sign')}")  # m = 4: censored, where its runs ended
    assert list(mark.get_xdata()) == [4.0] and mark.get_ydata()[0] == pytest.approx(4 * 2.0 * 5)
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and "m = 4 (2 censored)" in caption


@pytest.mark.slow  # draws the figure: `make test` runs it, test-fast does not
def test_one_seed_is_said_and_drawn_without_bars(study, monkeypatch, tmp_path):
    root, points, summary = study
    panels, caption = drawn(monkeypatch, root, points[points["seed"] == 0], summary[summary["seed"] == 0], tmp_path)
    assert "1 seed per point" in caption and not panels["(a) ring: accuracy against lost messages"].collections


def test_a_summary_without_the_fault_columns_is_of_a_perfect_network_and_refused(study):
    """An older or a hand-made summary: the figure gives its requirement's reason (that perfect runs give it:
    tests/test_figure_catalog.py)."""
    root, points, summary = study
    assert faults_effect.draw(root, points, summary.drop(columns=["drop", "straggler_mean"]), root / "f") == NO_FAULTS
