"""What each figure computes and shows of its tidy tables with known answers (the laws every figure keeps are
tests/test_figure_catalog.py's), Table 1, the per-cell table and the figures and report commands."""
import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from matplotlib.colors import to_rgba

from analysis import labels
from analysis.figures import (accuracy_curves, accuracy_vs_spectral_gap, command, consensus, gap_vs_nodes,
                              lag_vs_consensus, methods, time_to_accuracy)
from analysis.load import Runs, load_runs
from analysis.summary import summarize
from analysis.tables import cell_table_markdown, table1_latex, table1_markdown
from analysis_fixtures import make_run
from figure_probe import kept_figures

RHO = {"ring": {4: 0.667, 16: 0.051}, "torus": {4: 0.6, 16: 0.4}}
COMPRESSOR_BITS = {"none": 32e4, "sign": 1e4, "qsgd:4": 4e4}


def run_points(algorithm, compressor, topology, nodes, seed, final, network="datacenter-10g", diverge_at=None):
    """Eleven evaluations (epochs 0..10) rising to ``final``; a diverging run stops at ``diverge_at``."""
    epochs = range(11 if diverge_at is None else diverge_at + 1)
    acc = [0.1 + (final - 0.1) * (1 - math.exp(-e / 2.5)) + 0.002 * seed for e in epochs]
    rho = 1.0 if algorithm == "allreduce" else RHO[topology][nodes]
    comm = (0.002 if network == "datacenter-10g" else 0.05) * COMPRESSOR_BITS[compressor] / 32e4
    df = pd.DataFrame({"epoch": list(epochs), "test_acc": acc})
    df["step"] = df["epoch"] * 10
    df["bits_per_worker"] = df["step"] * COMPRESSOR_BITS[compressor]
    df["time_s"] = df["step"] * (0.01 + comm)
    df["consensus_distance"] = 0.0 if algorithm == "allreduce" else 1e-3 / rho ** 2
    status = "completed" if diverge_at is None else "diverged"
    run_id = f"{algorithm}-{compressor}_{topology}{nodes}_{network}_s{seed}"
    return df.assign(run_id=run_id, status=status, task="mnist1d-mlp", algorithm=algorithm, compressor=compressor,
                     topology=topology, nodes=nodes, seed=seed, spectral_gap=rho, network=network, data="shuffle",
                     cell=run_id.rsplit("_s", 1)[0])


@pytest.fixture(scope="module")
def points():
    """Three seeds of each method on a ring and a torus at n = 4 and 16 (all-reduce once) under two network presets;
    a method loses 0.05 (ring) or 0.02 (torus) of all-reduce's accuracy per 4 workers; ECD diverges at epoch 3."""
    finals = {("allreduce", "none"): 0.92, ("dpsgd", "none"): 0.90, ("choco", "sign"): 0.89, ("ecd", "qsgd:4"): 0.5}
    return pd.concat([run_points(a, c, topology, nodes, seed, final - (0 if a == "allreduce" else (
        0.02 if topology == "torus" else 0.05) * nodes / 4), network, diverge_at=3 if a == "ecd" else None)
        for network, topology, nodes, ((a, c), final), seed in itertools.product(
            ("datacenter-10g", "p2p-100m"), ("ring", "torus"), (4, 16), finals.items(), range(3))
        if a != "allreduce" or topology == "ring"], ignore_index=True)


@pytest.fixture(scope="module")
def summary(points):
    """The runs' table as analysis.summary writes it, with the target 0.8."""
    last = points.groupby("run_id", sort=False).tail(1).reset_index(drop=True)
    runs = last.assign(final_test_acc=last["test_acc"], final_consensus_distance=last["consensus_distance"])
    return summarize(Runs(runs, points), target_acc=0.8)


REACH = 100 * (1 - math.exp(-10 / 2.5))  # points per unit of final accuracy at epoch 10
ECD = "ECD-PSGD (QSGD 4-bit)"


@pytest.mark.parametrize("table, at, column, want", [
    ("gap", ("ring", "D-PSGD", 16), "gap", (0.92 - (0.90 - 0.2)) * REACH),  # all-reduce minus the method
    ("gap", ("torus", "Choco-SGD (sign)", 4), "gap", (0.92 - (0.89 - 0.02)) * REACH),
    ("gap", ("ring", ECD, 4), "gap", math.nan),  # every ECD seed diverged: no gap, the point kept with its count
    ("gap", ("ring", ECD, 4), "diverged", 3),
    ("bars", ("p2p-100m", ECD), "median", math.inf),  # an unreached target is a bar with its status
    ("bars", ("p2p-100m", ECD), "status", "3 diverged"),
    ("bars", ("datacenter-10g", "all-reduce"), "reached", 3),  # its median: the drawn bar's height (below)
])
def test_a_figures_table_holds_the_known_answer(summary, table, at, column, want):
    if table == "gap":
        got = gap_vs_nodes.gap_table(summary[summary["network"] == "p2p-100m"]).set_index(
            ["topology", "method", "nodes"]).loc[at, column]
    else:
        ring4 = summary[(summary["topology"] == "ring") & (summary["nodes"] == 4)]
        got = time_to_accuracy.bar_table(ring4).set_index(["network", "method"]).loc[at, column]
    assert got == want or got == pytest.approx(want, nan_ok=True)


def by_gid(ax, prefix):
    return [a for a in ax.get_children() if str(a.get_gid() or "").startswith(prefix)]


def test_accuracy_curves_draw_each_of_a_few_seeds_and_their_median_and_the_band_of_many(points, monkeypatch,
                                                                                        tmp_path):
    kept = kept_figures(monkeypatch, accuracy_curves)
    ring4 = points[(points["topology"] == "ring") & (points["nodes"] == 4) & (points["network"] == "p2p-100m")]
    accuracy_curves.plot_accuracy_curves(ring4, tmp_path / "a")
    choco, ecd = (labels.method_label(*m) for m in [("choco", "sign"), ("ecd", "qsgd:4")])
    for ax in kept[0].axes[:3]:
        seeds, median = by_gid(ax, f"seed:{choco}"), by_gid(ax, f"median:{choco}")
        assert len(seeds) == 3 and len(median) == 1  # three seeds: each drawn, and their median
        assert median[0].get_linestyle() == labels.style(choco)["linestyle"] and not ax.collections  # no ± SD band
        diverged = by_gid(ax, f"diverged:{ecd}")  # × alone marks a diverged run (ECD's seeds), in its line style
        assert len(diverged) == 3 and {d.get_linestyle() for d in diverged} == {labels.style(ecd)["linestyle"]}
    # six seeds: the median and its interquartile band, no line per seed
    more = pd.concat([ring4, ring4.assign(run_id=ring4["run_id"] + "b", seed=ring4["seed"] + 3)], ignore_index=True)
    accuracy_curves.plot_accuracy_curves(more, tmp_path / "b")
    ax = kept[1].axes[0]
    assert not by_gid(ax, f"seed:{choco}") and len(by_gid(ax, f"median:{choco}")) == 1 and ax.collections


@pytest.mark.parametrize("module, seeds, said, unsaid", [
    (gap_vs_nodes, 1, ["averaged model", "1 seed per point", "no error bars"], "error bars ±"),
    (gap_vs_nodes, 3, ["averaged model", "3 seeds per point", "error bars ± 1"], "no error bars"),
    (accuracy_vs_spectral_gap, 1, ["1 seed per point"], "± 1 std"),
    (accuracy_vs_spectral_gap, 3, ["mean ± 1 std over seeds"], "1 seed per point"),
])
def test_a_caption_says_how_many_seeds_and_promises_no_spread_from_one(points, summary, module, seeds, said, unsaid,
                                                                       monkeypatch, tmp_path):
    kept_figures(monkeypatch, module)
    _, caption = module.draw(tmp_path, points[points["seed"] < seeds], summary[summary["seed"] < seeds], tmp_path / "f")
    assert all(words in caption for words in said) and unsaid not in caption, caption


def spectral_summary(rhos: dict) -> pd.DataFrame:
    """Two seeds of D-PSGD and sign-Choco on each topology (its ρ), and all-reduce."""
    rows = [{"run_id": f"{topology}-{algorithm}-{seed}", "algorithm": algorithm, "seed": seed, "topology": topology,
             "compressor": "sign" if algorithm == "choco" else "none", "status": "completed", "spectral_gap": rho,
             "final_test_acc": 0.6 + 0.1 * rho + 0.01 * seed, "final_consensus_distance": 1e-3 / rho}
            for (topology, rho), algorithm, seed in itertools.product(rhos.items(), ("dpsgd", "choco"), (0, 1))]
    return pd.DataFrame(rows + [{"run_id": "ar", "algorithm": "allreduce", "compressor": "none", "topology": "ring",
                                 "seed": 0, "status": "completed", "spectral_gap": 1.0, "final_test_acc": 0.7,
                                 "final_consensus_distance": 0.0}])


def test_spectral_gap_tick_labels_never_overlap(monkeypatch):
    # n = 16: the exponential graph beside the torus, Erdős–Rényi beside both; complete at 1
    rhos = {"ring": 0.0507, "erdos-renyi:0.3": 0.174, "torus": 0.4, "exponential": 0.5, "complete": 1.0}
    kept = kept_figures(monkeypatch, accuracy_vs_spectral_gap)
    accuracy_vs_spectral_gap.plot_accuracy_vs_spectral_gap(spectral_summary(rhos), Path("unused"))
    kept[0].canvas.draw()
    for ax in kept[0].axes:
        shown = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        assert len(shown) == len(rhos)  # every topology named at its ρ
        for a, b in itertools.combinations(shown, 2):
            assert not a.get_window_extent().overlaps(b.get_window_extent()), (a.get_text(), b.get_text())


def test_the_spectral_figure_adds_a_panel_against_the_effective_neighbours_where_runs_report_them(monkeypatch):
    rhos = {"ring": 0.051, "star": 0.062, "torus": 0.4, "complete": 1.0, "base:1": 1.0}
    n_eff = {"ring": 6.6, "star": 2.32, "torus": 12.23, "complete": 16.0, "base:1": 15.2}  # the last two: close
    summary = spectral_summary(rhos)
    summary["n_eff"] = summary["topology"].map(n_eff)
    kept = kept_figures(monkeypatch, accuracy_vs_spectral_gap)
    accuracy_vs_spectral_gap.plot_accuracy_vs_spectral_gap(summary, Path("unused"))
    assert len(kept[0].axes) == 3 and "n_W" in kept[0].axes[2].get_xlabel()
    panel = kept[0].axes[2]
    assert sorted(t.get_text() for t in panel.texts) == sorted(rhos)  # each graph named once, none on another
    assert not any(a.get_window_extent().overlaps(b.get_window_extent())
                   for a, b in itertools.combinations(panel.texts, 2))
    assert all(all(a != b for a, b in itertools.pairwise(line.get_xdata())) for line in kept[0].axes[0].lines
               if line.get_gid())  # no vertical
    # each method's points sit at the graphs' n_W with their mean accuracies
    xs = sorted(x for line in panel.lines for x in line.get_xdata() if line.get_marker() not in (None, "None", ""))
    assert sorted(set(xs)) == sorted(n_eff.values())
    kept.clear()  # runs that predate run.json's n_eff: the two panels of ρ alone
    accuracy_vs_spectral_gap.plot_accuracy_vs_spectral_gap(spectral_summary(rhos), Path("unused"))
    assert len(kept[0].axes) == 2


def ring4_censored(summary):
    """The ring of 4, where D-PSGD on p2p ran its 10 epochs (100 steps of 0.01 s compute + 0.05 s comm) and
    missed the target with every seed, and one seed of Choco on datacenter missed it."""
    ring4 = summary[(summary["topology"] == "ring") & (summary["nodes"] == 4)].copy()
    missed = (ring4["algorithm"] == "dpsgd") & (ring4["network"] == "p2p-100m")
    ring4.loc[missed, ["tta_status", "time_to_target_s"]] = ["censored", math.inf]
    one = (ring4["algorithm"] == "choco") & (ring4["network"] == "datacenter-10g") & (ring4["seed"] == 2)
    ring4.loc[one, ["tta_status", "time_to_target_s"]] = ["censored", math.inf]  # 2 of 3 reached: said on the bar
    return ring4


def test_unreached_targets_are_no_bars_to_an_arbitrary_height(summary, points, monkeypatch, tmp_path):
    assert "target" in time_to_accuracy.draw(tmp_path, None, summary.assign(tta_status="no_target"), tmp_path / "t")
    kept = kept_figures(monkeypatch, time_to_accuracy)
    dpsgd = labels.method_label("dpsgd", "none")
    time_to_accuracy.plot_time_to_accuracy(ring4_censored(summary), Path("unused"), points=points)
    ax = kept[0].axes[0]
    bars = {bar.get_gid(): bar.get_height() for bar in ax.patches if bar.get_gid()}
    ecd = labels.method_label("ecd", "qsgd:4")
    # reached: a bar at the median time; all-reduce on datacenter (seed 1: 0.7565 at epoch 4, 0.8111 at 5) crosses
    # 0.8 at epoch 4.798 (read linearly), 47.98 steps of 0.012 s
    assert bars[f"reached:datacenter-10g:{labels.method_label('allreduce', 'none')}"] == pytest.approx(0.5757, abs=1e-4)
    # censored: no bar of a time, a hatched outline up to where the runs ended, ▲ on top, "> 6 s"
    assert f"reached:p2p-100m:{dpsgd}" not in bars
    assert bars[f"unreached:p2p-100m:{dpsgd}"] == pytest.approx(6.0)
    outline = next(b for b in ax.patches if b.get_gid() == f"unreached:p2p-100m:{dpsgd}")
    assert outline.get_hatch() and to_rgba(outline.get_facecolor()) == to_rgba("white")
    mark = by_gid(ax, f"unreached-mark:p2p-100m:{dpsgd}")[0]
    assert mark.get_marker() == "^" and mark.get_ydata()[0] == pytest.approx(6.0)
    assert any("3 censored: > 6 s" in t.get_text() for t in ax.texts) and any(t.get_text() == "2/3" for t in ax.texts)
    # diverged: no bar at all, × where the runs diverged (epoch 3 = step 30; QSGD sends 1/8 of the bits)
    assert not [gid for gid in bars if gid.endswith(ecd)]
    mark = by_gid(ax, f"unreached-mark:p2p-100m:{ecd}")[0]
    assert mark.get_marker() == "x" and mark.get_ydata()[0] == pytest.approx(30 * (0.01 + 0.05 / 8))
    # times within DECADES of each other: bars from 0 on a linear axis
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0 and all(b.get_y() == 0 for b in ax.patches)
    # without the points that say where runs ended: ▲ at the top of the axis, no outline of an arbitrary height
    time_to_accuracy.plot_time_to_accuracy(ring4_censored(summary), Path("unused"))
    ax = kept[1].axes[0]
    assert by_gid(ax, f"unreached-mark:p2p-100m:{dpsgd}") and not by_gid(ax, f"unreached:p2p-100m:{dpsgd}")


def test_time_to_accuracy_spanning_decades_draws_dots_on_a_log_axis(summary, points, monkeypatch):
    kept = kept_figures(monkeypatch, time_to_accuracy)
    p2p = ring4_censored(summary).query("network == 'p2p-100m'")
    slow = p2p["algorithm"] == "allreduce"  # all-reduce 1000 times slower: three decades from Choco
    p2p.loc[slow, "time_to_target_s"] *= 1000
    time_to_accuracy.plot_time_to_accuracy(p2p, Path("unused"), points=points)
    ax, choco = kept[0].axes[0], labels.method_label("choco", "sign")
    assert ax.get_yscale() == "log" and not ax.patches  # no bar starting at an arbitrary floor
    times = p2p.loc[p2p["algorithm"] == "choco", "time_to_target_s"]
    (dot,) = by_gid(ax, f"reached:p2p-100m:{choco}")
    assert list(dot.get_ydata()) == [pytest.approx(times.median())]
    (seeds,) = by_gid(ax, f"seeds:p2p-100m:{choco}")  # the seeds' min–max
    assert list(seeds.get_ydata()) == [pytest.approx(times.min()), pytest.approx(times.max())]
    # an unreached target is still shown: a mark where its runs ended, and what happened
    (mark,) = by_gid(ax, f"unreached-mark:p2p-100m:{labels.method_label('dpsgd', 'none')}")
    assert mark.get_ydata()[0] == pytest.approx(6.0) and mark.get_marker() == time_to_accuracy.BEYOND


def test_on_two_partitions_curves_name_the_one_they_show_and_the_lag_fit_says_where_it_cannot(points, summary,
                                                                                              monkeypatch, tmp_path):
    curves, lags = kept_figures(monkeypatch, accuracy_curves), kept_figures(monkeypatch, lag_vs_consensus)
    sorted_too = pd.concat([points, points.assign(data="sorted", run_id=points["run_id"] + "-sorted")])
    _, caption = accuracy_curves.draw(tmp_path, sorted_too, summary, tmp_path / "a")
    assert "data partition shuffle" in caption and curves[0]._suptitle.get_text().endswith("data: shuffle")
    ahead = summary.assign(data="sorted", run_id=summary["run_id"] + "-sorted")
    ahead.loc[ahead["algorithm"] != "allreduce", "final_test_acc"] = 0.99  # every method ahead of all-reduce
    _, caption = lag_vs_consensus.draw(tmp_path, sorted_too, pd.concat([summary, ahead]), tmp_path / "l")
    fitted, unfitted = (" ".join(t.get_text() for t in ax.texts) for ax in lags[0].axes[:2])
    assert "gap ≈" in fitted and "no fit" in unfitted and "sorted: no fit" in caption


TRACES = pd.DataFrame([{"method": m, "gamma": g, "step": s, "rel_error": 0.5 ** (s * k), "bits_per_worker": s * b,
                        "topology": "ring", "nodes": 8, "spectral_gap": 0.195, "dim": 100, "seed": 0}
                       for m, g, k, b in [("exact", 1.0, 1.0, 3200), ("sign", 0.4, 0.3, 132)] for s in range(0, 40, 4)])


def test_consensus_bits_axis_starts_at_the_first_bits_sent(monkeypatch, tmp_path):
    kept = kept_figures(monkeypatch, consensus)
    consensus.plot_consensus(TRACES, tmp_path / "c")
    rounds, bits = kept[0].axes[:2]
    assert min(line.get_xdata().min() for line in rounds.get_lines() if len(line.get_xdata()) > 2) == 0
    drawn = [line.get_xdata() for line in bits.get_lines() if len(line.get_xdata()) > 2]
    assert len(drawn) == 2 and all(x.min() > 0 for x in drawn)  # round 0 (0 bits) is not on the log axis
    first = TRACES.loc[TRACES["bits_per_worker"] > 0, "bits_per_worker"].min() / 1e6
    assert first / 1.3 < bits.get_xlim()[0] <= first


def table1_summary(cells):
    rows = []
    for (algorithm, compressor), entries in cells.items():
        for seed, (acc, status) in enumerate(entries):
            rows.append({"run_id": f"{algorithm}-{compressor}-{seed}", "cell": f"{algorithm}-{compressor}",
                         "task": "cifar10-resnet20", "algorithm": algorithm, "compressor": compressor,
                         "topology": "ring", "nodes": 8, "seed": seed, "status": status, "final_test_acc": acc})
    return pd.DataFrame(rows)


TABLE1 = table1_summary({
    ("allreduce", "none"): [(92.6, "completed"), (92.7, "completed"), (92.62, "completed")],
    ("choco", "qsgd:4"): [(92.0, "completed"), (92.5, "completed"), (93.0, "completed")],
    ("dcd", "qsgd:4"): [(23.56, "completed"), (20.0, "completed"), (26.0, "completed")],
    ("ecd", "qsgd:4"): [(10.0, "diverged"), (10.0, "diverged"), (10.0, "diverged")],
    ("ecd", "top:0.5"): [(17.03, "completed"), (10.0, "diverged"), (10.0, "diverged")],
    ("choco", "top:0.5"): [(92.54, "completed"), (92.3, "completed"), (92.8, "completed"), (float("nan"), "failed")],
})  # a failed run is left out; one seed's accuracy alone has no ± (ECD's top 50%)


@pytest.mark.parametrize("render, first, lines", [
    # the columns and reference lines are named as the runs name their algorithms (run.json)
    (table1_markdown, "| compression | Choco-SGD | DCD-PSGD | ECD-PSGD |",
     ["| QSGD 4-bit | 92.50 ± 0.50 | 23.19 ± 3.02 | diverges |",
      "| top 50% | 92.55 ± 0.25 | — | 17.03 (2 of 3 diverged) |", "all-reduce: 92.64 ± 0.05 (3 seeds)"]),
    # accuracies as fractions read as percent; LaTeX escaped
    (lambda t: table1_latex(t.assign(final_test_acc=t["final_test_acc"] / 100)), r"\begin{tabular}{lccc}",
     [r"QSGD 4-bit & 92.50 $\pm$ 0.50 & 23.19 $\pm$ 3.02 & diverges \\",
      r"top 50\% & 92.55 $\pm$ 0.25 & -- & 17.03 (2 of 3 diverged) \\", r"\multicolumn{4}{l}{all-reduce"]),
])
def test_table1_cells(render, first, lines):
    text = render(TABLE1)
    assert text.splitlines()[0] == first and all(line in text for line in lines), text


def test_cell_table_from_runs_and_from_cell_summary(summary):
    md = cell_table_markdown(summary[summary["network"] == "p2p-100m"])
    ecd = next(line for line in md.splitlines() if "ECD" in line and "| ring" in line)
    assert "3 diverged" in ecd and "diverges" in ecd and "diverged (0/3)" in ecd
    allreduce = next(line for line in md.splitlines() if line.startswith("| all-reduce")
                     and "4" in [c.strip() for c in line.split("|")])
    # final accuracy 0.1 + 0.82 (1 - e^-4) + 0.002 seed, in %: 90.50, 90.70, 90.90
    assert "90.70 ± 0.20" in allreduce and "| 2.88 (3/3) " in allreduce  # 47.98 steps of 0.06 s on p2p
    from analysis.summary import cell_summary

    cells = cell_summary(summary.drop(columns="final_gap").assign(gamma=0.5, delta_measured=1.0, bits_per_step=1.0,
                                                                   beta=1.0))  # a summary without the gap
    md = cell_table_markdown(cells)
    assert "not reached" in md and "[" in md and md.count("\n") == len(cells) + 2


def test_figures_only_one_keeps_the_other_captions(points, summary, tmp_path, monkeypatch):
    monkeypatch.setattr(command, "load_tables", lambda d: (points, summary, ""))
    assert command.main([str(tmp_path), "--only", "gap_vs_nodes"]) == 0
    # no traces.csv: consensus is not drawn, which, asked for by name, is an error (the figure's pipeline job fails)
    assert command.main([str(tmp_path), "--only", "time_to_accuracy", "consensus"]) == 1
    index = json.loads((tmp_path / "figures" / "index.json").read_text())
    assert set(index) == {"gap_vs_nodes", "time_to_accuracy"}
    # run by hand on the study, it draws the study's figures, not every one the runs support (the next report
    # showed figures the study never asked for)
    before = {p.name for p in (tmp_path / "figures").iterdir()}
    assert command.main([str(tmp_path)]) == 0
    assert {p.name for p in (tmp_path / "figures").iterdir()} == before
    assert set(json.loads((tmp_path / "figures" / "index.json").read_text())) == {"gap_vs_nodes", "time_to_accuracy"}


def test_time_to_accuracy_orders_the_presets_by_the_bandwidth_their_runs_state(tmp_path):
    rows = [{"network": network, "path": str(tmp_path / network)} for network in ("a-slow", "b-fast", "c-middle")]
    for row, bandwidth in zip(rows, (1e6, 1e10, 1e8)):
        (run := Path(row["path"])).mkdir()
        (run / "run.json").write_text(json.dumps({"network": {"name": row["network"], "bandwidth_bps": bandwidth}}))
    assert time_to_accuracy.network_order(pd.DataFrame(rows)) == ["b-fast", "c-middle", "a-slow"]  # not by name
    (tmp_path / "c-middle" / "run.json").write_text("{")  # a run that does not say: after those that do
    assert time_to_accuracy.network_order(pd.DataFrame(rows)) == ["b-fast", "a-slow", "c-middle"]


@pytest.mark.slow  # draws its figures (2 s): make test, not test-fast
def test_methods_draws_a_method_without_a_graph_once_in_small_multiples(tmp_path, monkeypatch):
    kept = kept_figures(monkeypatch, methods)
    for data, topology, (algorithm, compressor), seed in itertools.product(
            ("shuffle", "dirichlet:0.1"), ("ring", "exponential"), [("allreduce", "none"), ("ef", "sign"),
                                                                    ("choco", "sign"), ("dgc", "top:0.01")], (0, 1)):
        make_run(tmp_path / f"{data}-{topology}-{algorithm}-{seed}".replace(":", ""), algorithm=algorithm, seed=seed,
                 compressor=compressor, topology=topology, data=data, nodes=16,
                 epochs_points=[{"epoch": e, "test_acc": 0.1 + 0.1 * e + 0.01 * seed} for e in range(4)])
    points = load_runs(tmp_path).points
    assert not isinstance(methods.draw(tmp_path, points, None, tmp_path / "methods"), str)
    table = methods.curves(points)
    graphs = table[table["data"] == "shuffle"].groupby("method")["topology"].nunique()
    # all-reduce, EF-SGD and DGC use no graph: one line each; Choco one per graph
    assert graphs.to_dict() == {"all-reduce": 1, "Choco-SGD (sign)": 2, "DGC (top 1%)": 1, "EF-SGD (sign)": 1}
    axes = kept[0].axes
    # a row of (bits, time) x 2 partitions per group: decentralized Choco, then centralized EF-SGD and DGC
    assert len(axes) == 8 and axes[2].get_title().startswith("dirichlet:0.1")
    assert [[t.get_text() for t in axes[k].get_legend().get_texts()] for k in (3, 7)] == [
        ["all-reduce", "Choco-SGD (sign)"], ["all-reduce", "DGC (top 1%)", "EF-SGD (sign)"]]
    lines = [line for line in axes[0].get_lines() if len(line.get_xdata())]
    assert len(lines) == 3 + 2 and all(min(line.get_xdata()) > 0 for line in lines)  # log bits axis: no 0-bit start
    assert sorted(line.get_color() for line in lines).count("0.82") == 2 and axes[0].collections  # the rest grey
    row = table[(table["method"] == "all-reduce") & (table["data"] == "shuffle") & (table["step"] == 30)]
    assert row["acc"].iloc[0] == 100 * (0.1 + 0.3 + 0.005)  # the median over the two seeds


@pytest.mark.slow  # draws its figures (2 s): make test, not test-fast
def test_partial_figures_draw_the_finished_runs_of_a_running_study_beside_its_own(tmp_path, capsys):
    for nodes, status in ((4, "completed"), (16, "completed"), (36, "running")):
        make_run(tmp_path / "runs" / f"r{nodes}", nodes=nodes, status=status, metrics=status != "running")
    assert command.main([str(tmp_path), "--partial"]) == 0
    assert "from the 2 runs finished so far" in capsys.readouterr().out
    index = tmp_path.parent / f"{tmp_path.name}-partial" / "figures" / "index.json"
    assert "accuracy_curves" in json.loads(index.read_text()) and not (tmp_path / "figures").exists()  # the pipeline's
