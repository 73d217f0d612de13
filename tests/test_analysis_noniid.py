"""The non-i.i.d. comparison: intervals, the per-partition table on runs with known answers, the
figure and the report section."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from matplotlib.colors import to_rgba

from analysis import labels, report
from analysis.figures import noniid_effect
from analysis.load import load_runs
from analysis.noniid import (difference_interval, gap_table, heterogeneity, mean_interval, noniid_table,
                             write_table)
from analysis.summary import summarize
from analysis_fixtures import make_cell, make_run
from figure_probe import kept_figures, method_look


def test_mean_interval_is_the_t_interval_and_the_difference_welchs():
    half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert mean_interval([1.0, 2.0, 3.0]) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    assert math.isnan(mean_interval([5.0])[1]) and math.isnan(mean_interval([])[0])
    # (Welch's interval of a difference: the noniid and gap tables' test, by its formula and by scipy)
    assert math.isnan(difference_interval([1.0], [2.0, 3.0])[1])  # one seed: a difference, no interval


@pytest.fixture(scope="module")
def noniid_runs(tmp_path_factory):
    """ring8: all-reduce 0.90/0.88 (shuffle/sorted), D-PSGD 0.86/0.70 with seeds ±0.02; a third
    D-PSGD seed on sorted diverged; Choco only on shuffle (not comparable, left out)."""
    tmp_path = tmp_path_factory.mktemp("noniid")
    accs = {("allreduce", "shuffle"): [0.90, 0.90], ("allreduce", "sorted"): [0.88, 0.88],
            ("dpsgd", "shuffle"): [0.84, 0.86, 0.88], ("dpsgd", "sorted"): [0.68, 0.70, 0.72]}
    for (algorithm, data), values in accs.items():
        make_cell(tmp_path, f"{algorithm}_{data}", values, algorithm=algorithm, compressor="none", data=data,
                  steps_per_epoch=31)
    make_run(tmp_path / "dpsgd_sorted" / "s9", seed=9, algorithm="dpsgd", compressor="none", data="sorted",
             status="diverged", epochs=2, steps_per_epoch=31,
             epochs_points=[{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": 0.1}])
    make_cell(tmp_path, "choco_shuffle", [0.85, 0.85], data="shuffle", steps_per_epoch=31)
    return tmp_path


def test_noniid_and_gap_tables_on_runs_with_known_values(noniid_runs):
    summary = summarize(load_runs(noniid_runs), target_rel=0.95)
    table = noniid_table(summary).set_index(["algorithm", "data"])
    assert set(table.index) == {("allreduce", "shuffle"), ("allreduce", "sorted"), ("dpsgd", "shuffle"),
                                ("dpsgd", "sorted")}
    sorted_dpsgd = table.loc[("dpsgd", "sorted")]
    assert sorted_dpsgd["acc"] == pytest.approx(70.0) and sorted_dpsgd["seeds"] == 4
    assert sorted_dpsgd["diverged"] == 1 and sorted_dpsgd["steps_per_epoch"] == 31
    # Δ = 70 − 86 with Welch's interval on two samples of three with sd 2: t(4 dof) · 2·sqrt(2/3)
    half = stats.t.ppf(0.975, 4) * 2.0 * math.sqrt(2 / 3)
    assert sorted_dpsgd["delta"] == pytest.approx(-16.0)
    assert (sorted_dpsgd["delta_ci_low"], sorted_dpsgd["delta_ci_high"]) == pytest.approx((-16 - half, -16 + half))
    assert sorted_dpsgd["gap"] == pytest.approx(18.0) and table.loc[("dpsgd", "shuffle"), "gap"] == pytest.approx(4.0)
    assert table.loc[("allreduce", "sorted"), "delta"] == pytest.approx(-2.0)
    assert table.loc[("dpsgd", "shuffle"), "delta"] == 0.0 and table.loc[("dpsgd", "shuffle"), "iid_data"] == "shuffle"
    # the gap table: D-PSGD on sorted, all-reduce 88, 88 against 68, 70, 72 (the diverged seed left out), with
    # Welch's interval; Choco, run on shuffle only, has its one gap; all-reduce is the reference, not a row
    table = gap_table(summary).set_index(["algorithm", "data"])
    assert set(table.index) == {("dpsgd", "shuffle"), ("dpsgd", "sorted"), ("choco", "shuffle")}
    row = table.loc[("dpsgd", "sorted")]
    # Welch by hand (scipy's ttest_ind warns on the reference's two equal values): the reference has no variance,
    # so se² = var(68, 70, 72) / 3 = 4/3 and Welch–Satterthwaite gives 3 − 1 = 2 degrees of freedom
    half = stats.t.ppf(0.975, 2) * math.sqrt(4 / 3)
    assert row["gap"] == pytest.approx(18.0) and (row["gap_ci_low"], row["gap_ci_high"]) == pytest.approx(
        (18.0 - half, 18.0 + half))
    assert row["seeds"] == 3 and row["reference_seeds"] == 2 and table.loc[("choco", "shuffle"), "gap"] == 5.0


def test_figure_caption_and_report_section(noniid_runs, monkeypatch):
    kept = kept_figures(monkeypatch, noniid_effect)
    runs = load_runs(noniid_runs)
    summary = summarize(runs, target_rel=0.95)
    _, caption = noniid_effect.draw(noniid_runs, runs.points, summary, noniid_runs / "figures" / "noniid_effect")
    assert len(kept) == 1 and "D-PSGD (ring, n = 8) on sorted: -16.0 pp" in caption
    (noniid_runs / "summary.csv").write_text(summary.to_csv(index=False))
    text = report.build_report(noniid_runs)  # reads the stored summary
    assert "## Non-i.i.d. data" in text and "-16.00 [" in text and "i.i.d. reference" in text
    assert write_table(noniid_runs, summary) == noniid_runs / "noniid.csv"


def test_a_study_on_one_partition_has_no_noniid_table_or_section(tmp_path):
    make_cell(tmp_path, "ar", [0.9, 0.9], algorithm="allreduce", compressor="none")
    make_cell(tmp_path, "choco", [0.8, 0.8])
    runs = load_runs(tmp_path)
    summary = summarize(runs)
    assert noniid_table(summary).empty  # (the figure gives its requirement's reason: tests/test_figure_catalog.py)
    assert "## Non-i.i.d. data" not in report.build_report(tmp_path, (runs.points, summary, None), [])


def test_figures_of_topology_and_n_keep_the_iid_partition_only():
    from analysis.selection import iid_only

    runs = pd.DataFrame({"data": ["sorted", "sorted", "shuffle", "dirichlet:0.1"], "run_id": list("abcd")})
    assert list(iid_only(runs)["run_id"]) == ["c"]
    no_iid = runs[runs["data"] != "shuffle"]
    assert list(iid_only(no_iid)["run_id"]) == ["a", "b"]  # the most-run partition
    one = runs[runs["data"] == "sorted"]
    assert iid_only(one).equals(one)


def test_figure_draws_methods_in_their_look_partitions_as_glyphs_on_one_accuracy_axis(tmp_path, monkeypatch):
    kept = kept_figures(monkeypatch, noniid_effect)
    methods = [labels.method_label("dpsgd", "none"), labels.method_label("choco", "sign")]
    table = pd.DataFrame([{"topology": "ring", "nodes": n, "method": m, "data": d, "acc": acc, "acc_ci_low": acc - 1,
                           "acc_ci_high": acc + 1, "diverged": 0, "seeds": 3}
                          for n in (8, 16) for m in methods for d, acc in (("shuffle", 88.0), ("sorted", 70.0 - n))])
    noniid_effect.plot_noniid_effect(table, tmp_path / "f")
    panels = kept[0].axes  # n = 8 and 16
    for method in methods:
        colour = method_look(method)[0]
        marks = {line.get_gid().split(":")[0]: line for ax in panels for line in ax.get_lines()
                 if str(line.get_gid()).endswith(f":{method}")}
        assert set(marks) == {"shuffle", "sorted"} and {to_rgba(m.get_color()) for m in marks.values()} == {colour}
        faces = {data: to_rgba(mark.get_markerfacecolor()) for data, mark in marks.items()}
        assert faces == {"shuffle": colour, "sorted": to_rgba("white")}  # i.i.d. filled, non-i.i.d. hollow
        assert marks["shuffle"].get_marker() != marks["sorted"].get_marker()


def test_partitions_are_ordered_from_the_most_heterogeneous():
    schemes = ["shuffle", "dirichlet:10", "split", "dirichlet:0.01", "sorted", "dirichlet:1", "dirichlet:0.1"]
    assert sorted(schemes, key=heterogeneity) == ["sorted", "dirichlet:0.01", "dirichlet:0.1", "dirichlet:1",
                                                  "dirichlet:10", "shuffle", "split"]


def test_gap_vs_alpha_names_every_method_of_every_panel(tmp_path, monkeypatch):
    """A method drawn only in a later panel (centralized methods run on the ring alone) keeps its legend entry,
    once, in the methods' order; a panel shows its own partitions, and a line breaks where a method lacks one."""
    from analysis.figures import gap_vs_alpha

    rows = []
    for topology, methods in (("exponential", ["D-PSGD"]), ("ring", ["D-PSGD", "EF-SGD (sign)", "all-reduce x"])):
        for method in methods:
            for data, gap in (("dirichlet:0.01", 9.0), ("dirichlet:0.1", 8.0), ("dirichlet:1", 5.0), ("shuffle", 1.0)):
                if data not in {"exponential": ("dirichlet:0.1", "shuffle")}.get(topology, data) or (
                        "EF" in method and data == "dirichlet:0.1"):
                    continue  # the exponential graph at 0.1 and i.i.d. only; EF-SGD skips 0.1
                rows.append({"task": "t", "topology": topology, "nodes": 16, "algorithm": "a", "compressor": "c",
                             "data": data, "method": method, "seeds": 3, "reference_seeds": 3, "gap": gap,
                             "gap_ci_low": gap - 1, "gap_ci_high": gap + 1})
    kept = kept_figures(monkeypatch, gap_vs_alpha)
    gap_vs_alpha.plot_gap_vs_alpha(pd.DataFrame(rows), tmp_path / "g")
    (legend,) = kept[0].legends
    names = [t.get_text() for t in legend.get_texts()]
    assert sorted(names) == sorted({"D-PSGD", "EF-SGD (sign)", "all-reduce x"}) and len(names) == 3
    drawn = {line.get_gid() for ax in kept[0].axes for line in ax.get_lines() if line.get_gid()}
    assert drawn == {f"gap:{m}" for m in names}
    assert [t.get_text() for t in kept[0].axes[0].get_xticklabels()] == ["α = 0.1", "i.i.d.\n(shuffle)"]
    ef = next(line for line in kept[0].axes[1].get_lines() if line.get_gid() == "gap:EF-SGD (sign)")
    assert np.isnan(np.asarray(ef.get_ydata(), float)).tolist() == [False, True, False, False]  # 0.01, (0.1: a gap), 1, i.i.d.
