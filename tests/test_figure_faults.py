"""Runs on an unreliable network (run.json "faults"): their columns in the run table, their cells, and the
faults_effect figure drawn from a hand-made study with known answers, checked on the drawn Axes (that it draws
or says why, and its looks: tests/test_figure_catalog.py)."""
import itertools
import math

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from analysis.figures import faults_effect
from analysis.figures import requirements as req
from analysis.labels import method_label
from analysis.load import load_runs
from analysis.summary import load_tables
from analysis_fixtures import make_run

NODES = 16
DECENTRALIZED = {("dpsgd", "none"): (0.90, 0.5), ("choco", "sign"): (0.88, 0.2), ("choco", "top:0.01"): (0.86, 0.3)}
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


def fault_study(root, seeds=(0, 1)):
    """The faults study in small: losses on two graphs, stragglers on the ring, all-reduce as reference."""
    for (algorithm, compressor), topology, seed in itertools.product(DECENTRALIZED, TOPOLOGY_COST, seeds):
        tag = f"{algorithm}-{compressor}_{topology}"
        for drop in DROPS:
            run(root, f"{tag}_drop{drop}", algorithm, compressor, topology, seed,
                local_acc((algorithm, compressor), topology, drop, False, seed), faults={"drop": drop})
        for drop in BURSTY:
            run(root, f"{tag}_ge{drop}", algorithm, compressor, topology, seed,
                local_acc((algorithm, compressor), topology, drop, True, seed),
                faults={"drop": drop, "drop_model": "gilbert-elliott", "burst": 8})
    for seed in seeds:
        run(root, "allreduce_ref", "allreduce", "none", "ring", seed, 0.90 + 0.004 * seed)
        for mean in MEANS:
            slow = {"straggler": {"model": "exponential", "mean": mean}}
            run(root, f"allreduce_m{mean}", "allreduce", "none", "ring", seed, 0.90 + 0.004 * seed, faults=slow,
                seconds_per_epoch=2.0 * (1 + mean))
            for algorithm, compressor in [("dpsgd", "none"), ("choco", "sign")]:
                # Choco with the worst stragglers ends below the target: censored
                final = 0.70 if (compressor, mean) == ("sign", 4.0) else local_acc(
                    (algorithm, compressor), "ring", 0.0, False, seed)
                run(root, f"{algorithm}-{compressor}_m{mean}", algorithm, compressor, "ring", seed, final,
                    faults=slow, seconds_per_epoch=2.0 * (1 + mean))
    return load_tables(root)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    points, summary, _ = fault_study(root)
    return root, points, summary


def drawn(monkeypatch, root, points, summary, tmp_path):
    """The figure's panels by title, kept open instead of saved, and its caption."""
    kept = []
    monkeypatch.setattr(faults_effect, "save_figure", lambda fig, out_stem: kept.append(fig) or [])
    _, caption = faults_effect.draw(root, points, summary, tmp_path / "faults_effect")
    return {ax.get_title(): ax for ax in kept[0].axes if ax.get_title()}, caption


def by_gid(ax, gid):
    return [a for a in ax.get_lines() if a.get_gid() == gid]


def by_folder(root):
    runs = load_runs(root).runs
    return runs.set_index(runs["path"].map(lambda p: p.rsplit("/", 1)[-1]))


@pytest.fixture(scope="module")
def figure(study, tmp_path_factory):
    """The study's figure, drawn once: its panels by title and its caption."""
    with pytest.MonkeyPatch.context() as patch:
        return drawn(patch, *study, tmp_path_factory.mktemp("figure"))


# -- the run table ------------------------------------------------------------------------------------------------
def test_fault_columns_come_from_run_json_and_old_runs_read_as_a_perfect_network(tmp_path):
    make_run(tmp_path / "old", algorithm="dpsgd", compressor="none")  # before faults: no key, no message counts
    make_run(tmp_path / "ge", algorithm="dpsgd", compressor="none", messages_per_step=100, dropped_share=0.052,
             faults={"drop": 0.05, "drop_model": "gilbert-elliott", "burst": 8})
    make_run(tmp_path / "slow", algorithm="dpsgd", compressor="none", messages_per_step=10,
             faults={"straggler": {"model": "exponential", "mean": 0.5}})
    make_run(tmp_path / "fixed", algorithm="dpsgd", compressor="none",
             faults={"straggler": {"model": "fixed", "workers": [1], "factor": 4}})
    runs = by_folder(tmp_path)
    assert runs.loc["old", ["drop", "drop_model", "straggler_mean", "outages"]].tolist() == [0.0, "none", 0.0, 0]
    assert math.isnan(runs.loc["old", "burst"]) and math.isnan(runs.loc["old", "dropped_share"])
    assert runs.loc["ge", ["drop", "drop_model", "burst"]].tolist() == [0.05, "gilbert-elliott", 8.0]
    assert runs.loc["ge", "dropped_share"] == pytest.approx(0.052, abs=1e-9)  # 104 of 20 steps x 100 messages
    assert runs.loc["slow", ["drop_model", "straggler_mean", "dropped_share"]].tolist() == ["none", 0.5, 0.0]
    assert math.isnan(runs.loc["fixed", "straggler_mean"]) and runs.loc["fixed", "straggler_factor"] == 4.0
    assert runs["cell"].nunique() == 4  # one cell each: they differ only in faults


def test_late_messages_and_workers_away_are_neither_a_perfect_network_nor_a_loss_rate(tmp_path):
    """A run with late messages (or pairwise gossip, or workers away) at drop 0 is not drawn as the perfect
    network's point, nor one with losses as a plain loss rate."""
    make_run(tmp_path / "late", faults={"late": 0.2, "staleness": 2})
    make_run(tmp_path / "pair", faults={"pairwise": True}, seed=1)
    make_run(tmp_path / "away", faults={"drop": 0.05, "active": 0.5}, seed=2)
    make_run(tmp_path / "plain", faults={"drop": 0.05}, seed=3)
    runs = by_folder(tmp_path)
    assert runs.loc["late", ["late", "staleness", "active", "pairwise"]].tolist() == [0.2, 2.0, 1.0, False]
    assert runs.loc["pair", "pairwise"] and runs.loc["away", "active"] == 0.5
    assert req.perfect(runs).to_dict() == {"late": False, "pair": False, "away": False, "plain": False}
    assert req.lossy(runs).to_dict() == {"late": False, "pair": False, "away": False, "plain": True}
    assert runs["cell"].nunique() == 4


def test_runs_differing_only_in_faults_are_different_cells_also_against_an_older_run(tmp_path):
    make_run(tmp_path / "old")  # its config has no faults key: it ran on a perfect network
    make_run(tmp_path / "lossy", faults={"drop": 0.05})
    make_run(tmp_path / "perfect", faults={}, seed=1)
    assert not load_runs(tmp_path).skipped
    cells = by_folder(tmp_path)["cell"]
    assert len(cells) == 3 and cells["old"] == cells["perfect"] != cells["lossy"] and "drop" in cells["lossy"]


# -- the figure ---------------------------------------------------------------------------------------------------
@pytest.mark.slow  # draws the figure: `make test` runs it, test-fast does not
def test_losses_panel_draws_each_methods_median_at_each_drop_rate_and_bursts_apart(figure):
    panels, caption = figure
    assert [t for t in panels if t.startswith("(a)")] == ["(a) ring: accuracy against lost messages",
                                                          "(a) exponential: accuracy against lost messages"]
    for topology in TOPOLOGY_COST:
        ax = panels[f"(a) {topology}: accuracy against lost messages"]
        assert ax.get_xlim()[0] < 0 < ax.get_xlim()[1] and ax.get_xscale() == "symlog"
        assert sorted(ax.get_xticks()) == [d * 100 for d in DROPS]
        for method, (model, drops, style) in itertools.product(DECENTRALIZED, [("independent", DROPS, "-"),
                                                                               ("bursts", BURSTY, "--")]):
            (line,) = by_gid(ax, f"loss:{method_label(*method)}:{model}")
            want = [100 * np.median([local_acc(method, topology, d, model == "bursts", s) for s in (0, 1)])
                    for d in drops]
            assert list(line.get_xdata()) == [d * 100 for d in drops] and np.allclose(line.get_ydata(), want)
            # one colour per method; independent losses filled and solid, bursts hollow and dashed
            face = line.get_color() if model == "independent" else "white"
            assert line.get_linestyle() == style and to_rgba(line.get_markerfacecolor()) == to_rgba(face)
        (ref,) = by_gid(ax, "reference")
        assert np.allclose(ref.get_ydata(), 100 * np.median([0.90, 0.904]))
    assert "own model" in caption and "median over 2 seeds per point" in caption and "Gilbert-Elliott" in caption
    assert "0, 1, 5, 20%" in caption and "measured shares lost" in caption


@pytest.mark.slow  # draws the figure: `make test` runs it, test-fast does not
def test_straggler_panel_draws_time_to_target_against_the_straggler_mean(study, figure):
    (_, _, summary), (panels, caption) = study, figure
    assert "(b) exponential: time to target against stragglers" not in panels  # stragglers ran on the ring
    ax = panels["(b) ring: time to target against stragglers"]
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


def test_without_faults_the_figure_is_refused_with_its_requirements_reason_also_from_an_older_summary(study):
    root, points, summary = study
    perfect = summary[req.perfect(summary)]
    why = faults_effect.draw(root, points[points["run_id"].isin(perfect["run_id"])], perfect, root / "f")
    assert "unreliable network" in why and why == faults_effect.needs(req.Grid(perfect))
    # a summary without the fault columns at all (an older or a hand-made one): a perfect network
    assert faults_effect.draw(root, points, summary.drop(columns=["drop", "straggler_mean"]), root / "f") == why
