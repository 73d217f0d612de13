"""Figures, Table 1, the per-cell table and the report, from hand-built tables and run directories."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from matplotlib.colors import to_rgba

from analysis import labels, report
from analysis.figures import accuracy_curves, accuracy_vs_spectral_gap, command, consensus, gap_vs_nodes, time_to_accuracy
from analysis.tables import accuracy_text, cell_table_markdown, table1_latex, table1_markdown
from analysis_fixtures import make_cell

ROOT = Path(__file__).resolve().parents[1]
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
    methods = [("allreduce", "none", 0.92), ("dpsgd", "none", 0.90), ("choco", "sign", 0.89), ("ecd", "qsgd:4", 0.5)]
    parts = []
    for network in ("datacenter-10g", "p2p-100m"):
        for topology in ("ring", "torus"):
            for nodes in (4, 16):
                for algorithm, compressor, final in methods:
                    if algorithm == "allreduce" and topology != "ring":
                        continue  # all-reduce ignores the topology; it is recorded once
                    for seed in range(3):
                        loss = 0 if algorithm == "allreduce" else (0.02 if topology == "torus" else 0.05) * nodes / 4
                        parts.append(run_points(algorithm, compressor, topology, nodes, seed, final - loss, network,
                                                diverge_at=3 if algorithm == "ecd" else None))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def summary(points):
    rows = []
    for run_id, g in points.groupby("run_id", sort=False):
        first, last = g.iloc[0], g.iloc[-1]
        hit = g[g["test_acc"] >= 0.8]
        reached = len(hit) > 0 and first["status"] == "completed"
        cols = ["run_id", "cell", "task", "algorithm", "compressor", "topology", "nodes", "seed", "status",
                "spectral_gap", "network", "data"]
        missed = "diverged" if first["status"] == "diverged" else "censored"
        rows.append({**first[cols].to_dict(), "final_test_acc": last["test_acc"], "target": 0.8,
                     "tta_status": "reached" if reached else missed,
                     "time_to_target_s": hit["time_s"].iloc[0] if reached else math.inf,
                     "epochs_to_target": hit["epoch"].iloc[0] if reached else math.inf,
                     "bits_to_target": hit["bits_per_worker"].iloc[0] if reached else math.inf,
                     "final_consensus_distance": last["consensus_distance"]})
    return pd.DataFrame(rows)


def assert_files(paths, stem):
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.with_suffix("") == stem for p in paths)
    for path in paths:
        assert path.stat().st_size > 1000
    assert paths[0].read_bytes()[:4] == b"\x89PNG" and paths[1].read_bytes()[:4] == b"%PDF"


@pytest.mark.slow  # draws figures, PNG and PDF: `make test` runs it, test-fast does not
@pytest.mark.parametrize("module", [accuracy_curves, gap_vs_nodes, accuracy_vs_spectral_gap, time_to_accuracy])
def test_every_figure_writes_png_and_pdf_and_a_caption(module, points, summary, tmp_path):
    stem = tmp_path / "fig"
    result = module.draw(tmp_path, points, summary, stem)
    assert not isinstance(result, str), result
    paths, caption = result
    assert_files(paths, stem)
    assert len(caption) > 200 and "mnist1d-mlp" in caption


@pytest.mark.slow  # draws figures, PNG and PDF: `make test` runs it, test-fast does not
def test_plot_functions_take_a_tidy_frame(points, summary, tmp_path):
    sel = points[(points["topology"] == "ring") & (points["nodes"] == 4) & (points["network"] == "p2p-100m")]
    assert_files(accuracy_curves.plot_accuracy_curves(sel, tmp_path / "a"), tmp_path / "a")
    at16 = summary[(summary["nodes"] == 16) & (summary["network"] == "p2p-100m")]
    assert_files(accuracy_vs_spectral_gap.plot_accuracy_vs_spectral_gap(at16, tmp_path / "b"), tmp_path / "b")
    assert_files(time_to_accuracy.plot_time_to_accuracy(summary, tmp_path / "c"), tmp_path / "c")


def test_gap_table_is_all_reduce_minus_method(summary):
    table = gap_vs_nodes.gap_table(summary[summary["network"] == "p2p-100m"]).set_index(["topology", "method", "nodes"])
    reach = 100 * (1 - math.exp(-10 / 2.5))  # points per unit of final accuracy at epoch 10
    assert table.loc[("ring", "D-PSGD", 16), "gap"] == pytest.approx((0.92 - (0.90 - 0.2)) * reach)
    assert table.loc[("torus", "Choco-SGD (sign)", 4), "gap"] == pytest.approx((0.92 - (0.89 - 0.02)) * reach)
    # every ECD seed diverged: no gap, but the point is kept with its count
    assert math.isnan(table.loc[("ring", "ECD-PSGD (QSGD 4-bit)", 4), "gap"])
    assert table.loc[("ring", "ECD-PSGD (QSGD 4-bit)", 4), "diverged"] == 3


def test_unreached_targets_are_bars_with_their_status(summary):
    ring4 = summary[(summary["topology"] == "ring") & (summary["nodes"] == 4)]
    table = time_to_accuracy.bar_table(ring4).set_index(["network", "method"])
    ecd = table.loc[("p2p-100m", "ECD-PSGD (QSGD 4-bit)")]
    assert math.isinf(ecd["median"]) and ecd["status"] == "3 diverged"
    fast = table.loc[("datacenter-10g", "all-reduce")]
    # 0.8 is first reached at epoch 5 = step 50; a step costs 0.01 s compute + 0.002 s comm
    assert (fast["reached"], fast["median"]) == (3, pytest.approx(50 * 0.012))


def drawn_figure(monkeypatch, module):
    """The figures ``module`` draws, kept open instead of saved (its plot functions return [])."""
    kept = []
    monkeypatch.setattr(module, "save_figure", lambda fig, out_stem: kept.append(fig) or [])
    return kept


def by_gid(ax, prefix):
    return [a for a in ax.get_children() if str(a.get_gid() or "").startswith(prefix)]


def test_accuracy_curves_draw_each_of_a_few_seeds_and_their_median_without_bands(points, monkeypatch, tmp_path):
    kept = drawn_figure(monkeypatch, accuracy_curves)
    ring4 = points[(points["topology"] == "ring") & (points["nodes"] == 4) & (points["network"] == "p2p-100m")]
    accuracy_curves.plot_accuracy_curves(ring4, tmp_path / "a")
    choco = labels.method_label("choco", "sign")
    look = labels.style(choco)
    for ax in kept[0].axes[:3]:
        seeds, median = by_gid(ax, f"seed:{choco}"), by_gid(ax, f"median:{choco}")
        assert len(seeds) == 3 and len(median) == 1  # three seeds: each drawn, and their median
        assert all(s.get_linewidth() < median[0].get_linewidth() for s in seeds)
        assert median[0].get_marker() == look["marker"] and median[0].get_linestyle() == look["linestyle"]
        assert to_rgba(median[0].get_color()) == to_rgba(look["color"])
        assert not ax.collections  # no ± SD band
    # a line style names a method, in the legend too; × alone marks a diverged run (ECD's seeds here)
    ecd = labels.method_label("ecd", "qsgd:4")
    dpsgd = labels.method_label("dpsgd", "none")
    for ax in kept[0].axes[:3]:
        diverged = by_gid(ax, f"diverged:{ecd}")
        assert len(diverged) == 3 and {d.get_linestyle() for d in diverged} == {labels.style(ecd)["linestyle"]}
    styles = {line.get_label(): line.get_linestyle() for line in kept[0].legends[0].get_lines()}
    assert styles["diverged run, × where it stopped"] == "None"
    assert styles[dpsgd] == labels.style(dpsgd)["linestyle"]
    # six seeds: the median and its interquartile band, no line per seed
    more = pd.concat([ring4, ring4.assign(run_id=ring4["run_id"] + "b", seed=ring4["seed"] + 3)], ignore_index=True)
    accuracy_curves.plot_accuracy_curves(more, tmp_path / "b")
    ax = kept[1].axes[0]
    assert not by_gid(ax, f"seed:{choco}") and len(by_gid(ax, f"median:{choco}")) == 1 and ax.collections


def test_one_method_has_one_colour_and_marker_in_every_figure(points, summary, monkeypatch, tmp_path):
    choco = labels.method_label("choco", "sign")
    look = labels.style(choco)
    seen = []
    kept = drawn_figure(monkeypatch, accuracy_curves)
    accuracy_curves.draw(tmp_path, points, summary, tmp_path / "a")
    seen += [(line.get_color(), line.get_marker()) for line in by_gid(kept[0].axes[0], f"median:{choco}")]
    kept = drawn_figure(monkeypatch, accuracy_vs_spectral_gap)
    accuracy_vs_spectral_gap.draw(tmp_path, points, summary, tmp_path / "s")
    lines = by_gid(kept[0].axes[0], f"accuracy:{choco}") + by_gid(kept[0].axes[1], f"consensus:{choco}")
    seen += [(line.get_color(), line.get_marker()) for line in lines]
    kept = drawn_figure(monkeypatch, gap_vs_nodes)
    gap_vs_nodes.draw(tmp_path, points, summary, tmp_path / "g")
    panel = next(ax for ax in kept[0].axes if ax.get_title() == choco)
    seen += [(line.get_color(), None) for line in by_gid(panel, f"gap:{choco}:")]
    kept = drawn_figure(monkeypatch, time_to_accuracy)
    time_to_accuracy.draw(tmp_path, points, summary, tmp_path / "t")
    seen += [(bar.get_facecolor(), None) for bar in by_gid(kept[0].axes[0], "reached:")
             if bar.get_gid().endswith(f":{choco}")]
    assert len(seen) == 1 + 2 + 2 + 2  # one setting; two topologies twice; two network presets
    assert {to_rgba(colour) for colour, _ in seen} == {to_rgba(look["color"])}
    assert {marker for _, marker in seen if marker} == {look["marker"]}


def test_gap_vs_nodes_names_its_metric_and_promises_error_bars_only_with_seeds(summary, points, monkeypatch, tmp_path):
    kept = drawn_figure(monkeypatch, gap_vs_nodes)
    _, caption = gap_vs_nodes.draw(tmp_path, points, summary, tmp_path / "g")
    assert "averaged model" in caption and "3 seeds per point" in caption and "error bars ± 1" in caption
    assert "averaged model" in kept[0].axes[0].get_ylabel()
    one = summary[summary["seed"] == 0]
    _, caption = gap_vs_nodes.draw(tmp_path, points[points["seed"] == 0], one, tmp_path / "h")
    assert "1 seed per point" in caption and "no error bars" in caption and "error bars ±" not in caption


def test_accuracy_vs_spectral_gap_keeps_seed_noise_small_on_its_axis_and_says_one_seed(summary, points,
                                                                                       monkeypatch, tmp_path):
    kept = drawn_figure(monkeypatch, accuracy_vs_spectral_gap)
    one = summary[summary["seed"] == 0].copy()
    one.loc[one["algorithm"] != "allreduce", "final_test_acc"] = 0.595  # a flat 59.5 % at every ρ
    _, caption = accuracy_vs_spectral_gap.draw(tmp_path, points, one, tmp_path / "s")
    low, high = kept[0].axes[0].get_ylim()
    assert high - low >= accuracy_vs_spectral_gap.MIN_SPAN - 1e-9
    assert "1 seed per point" in caption and "± 1 std" not in caption
    _, caption = accuracy_vs_spectral_gap.draw(tmp_path, points, summary, tmp_path / "t")
    assert "mean ± 1 std over seeds" in caption


def test_unreached_targets_are_no_bars_to_an_arbitrary_height(summary, points, monkeypatch):
    kept = drawn_figure(monkeypatch, time_to_accuracy)
    ring4 = summary[(summary["topology"] == "ring") & (summary["nodes"] == 4)].copy()
    dpsgd = labels.method_label("dpsgd", "none")
    # D-PSGD on p2p: every seed ran its 10 epochs (100 steps of 0.01 s compute + 0.05 s comm) and missed
    missed = (ring4["algorithm"] == "dpsgd") & (ring4["network"] == "p2p-100m")
    ring4.loc[missed, ["tta_status", "time_to_target_s"]] = ["censored", math.inf]
    time_to_accuracy.plot_time_to_accuracy(ring4, Path("unused"), points=points)
    ax = kept[0].axes[0]
    bars = {bar.get_gid(): bar.get_height() for bar in ax.patches if bar.get_gid()}
    ecd = labels.method_label("ecd", "qsgd:4")
    # reached: a bar at the median time; all-reduce on datacenter reaches 0.8 at step 50 (0.012 s a step)
    assert bars[f"reached:datacenter-10g:{labels.method_label('allreduce', 'none')}"] == pytest.approx(0.6)
    # censored: no bar of a time, a hatched outline up to where the runs ended, ▲ on top, "> 6 s"
    assert f"reached:p2p-100m:{dpsgd}" not in bars
    assert bars[f"unreached:p2p-100m:{dpsgd}"] == pytest.approx(6.0)
    outline = next(b for b in ax.patches if b.get_gid() == f"unreached:p2p-100m:{dpsgd}")
    assert outline.get_hatch() and to_rgba(outline.get_facecolor()) == to_rgba("white")
    mark = by_gid(ax, f"unreached-mark:p2p-100m:{dpsgd}")[0]
    assert mark.get_marker() == "^" and mark.get_ydata()[0] == pytest.approx(6.0)
    assert any("3 censored: > 6 s" in t.get_text() for t in ax.texts)
    # diverged: no bar at all, × where the runs diverged (epoch 3 = step 30; QSGD sends 1/8 of the bits)
    assert not [gid for gid in bars if gid.endswith(ecd)]
    mark = by_gid(ax, f"unreached-mark:p2p-100m:{ecd}")[0]
    assert mark.get_marker() == "x" and mark.get_ydata()[0] == pytest.approx(30 * (0.01 + 0.05 / 8))
    assert not any(h == pytest.approx(1.0) for h in bars.values())


def test_consensus_bits_axis_starts_at_the_first_bits_sent(monkeypatch, tmp_path):
    kept = drawn_figure(monkeypatch, consensus)
    make_run_traces(tmp_path / "consensus" / "traces.csv")
    traces = pd.read_csv(tmp_path / "consensus" / "traces.csv")
    consensus.plot_consensus(traces, tmp_path / "c")
    rounds, bits = kept[0].axes[:2]
    assert min(line.get_xdata().min() for line in rounds.get_lines() if len(line.get_xdata()) > 2) == 0
    drawn = [line.get_xdata() for line in bits.get_lines() if len(line.get_xdata()) > 2]
    assert len(drawn) == 2 and all(x.min() > 0 for x in drawn)  # round 0 (0 bits) is not on the log axis
    first = traces.loc[traces["bits_per_worker"] > 0, "bits_per_worker"].min() / 1e6
    assert first / 1.3 < bits.get_xlim()[0] <= first
    # the compressor in its Choco-SGD look, exact gossip in D-PSGD's
    sign = next(line for line in bits.get_lines() if line.get_label().startswith("sign"))
    look = labels.styles_with([("choco", "sign")])[("choco", "sign")]
    assert to_rgba(sign.get_color()) == to_rgba(look["color"]) and sign.get_marker() == look["marker"]


def test_panels_across_n_share_their_y_axis(points, summary, monkeypatch, tmp_path):
    kept = drawn_figure(monkeypatch, gap_vs_nodes)
    gap_vs_nodes.draw(tmp_path, points, summary, tmp_path / "g")
    panels = kept[0].axes
    assert len(panels) == 3 and all(panels[0].get_shared_y_axes().joined(panels[0], ax) for ax in panels[1:])


def test_figures_without_data_are_skipped_with_a_reason(points, summary, tmp_path):
    one_n = summary[summary["nodes"] == 4]
    assert "node counts" in gap_vs_nodes.draw(tmp_path, None, one_n, tmp_path / "g")
    one_topology = summary[summary["topology"] == "ring"]
    assert "topologies" in accuracy_vs_spectral_gap.draw(tmp_path, None, one_topology, tmp_path / "s")
    assert "metrics" in accuracy_curves.draw(tmp_path, None, summary, tmp_path / "a")
    assert "target" in time_to_accuracy.draw(tmp_path, None, summary.assign(tta_status="no_target"), tmp_path / "t")
    assert not list(tmp_path.iterdir())


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
    ("choco", "top:0.5"): [(92.54, "completed"), (92.3, "completed"), (92.8, "completed")],
})


def test_table1_markdown_cells():
    md = table1_markdown(TABLE1)
    lines = md.splitlines()
    # the columns and reference lines are named as the runs name their algorithms (run.json)
    assert lines[0] == "| compression | Choco-SGD | DCD-PSGD | ECD-PSGD |"
    assert "| QSGD 4-bit | 92.50 ± 0.50 | 23.19 ± 3.02 | diverges |" in lines
    assert "| top 50% | 92.55 ± 0.25 | — | 17.03 (2 of 3 diverged) |" in lines
    assert "all-reduce: 92.64 ± 0.05 (3 seeds)" in md


def test_table1_reads_fractions_as_percent_and_latex_escapes():
    tex = table1_latex(TABLE1.assign(final_test_acc=TABLE1["final_test_acc"] / 100))
    assert r"QSGD 4-bit & 92.50 $\pm$ 0.50 & 23.19 $\pm$ 3.02 & diverges \\" in tex
    assert r"top 50\% & 92.55 $\pm$ 0.25 & -- & 17.03 (2 of 3 diverged) \\" in tex
    assert tex.startswith(r"\begin{tabular}{lccc}") and r"\multicolumn{4}{l}{all-reduce" in tex


def test_accuracy_text_single_seed_and_failed_runs_ignored():
    one = pd.DataFrame({"status": ["completed"], "acc": [91.234]})
    assert accuracy_text(one) == "91.23"
    table = table1_summary({("choco", "sign"): [(92.0, "completed"), (93.0, "completed"), (float("nan"), "failed")]})
    assert "| sign | 92.50 ± 0.71 |" in table1_markdown(table)


def test_cell_table_from_runs_and_from_cell_summary(summary):
    md = cell_table_markdown(summary[summary["network"] == "p2p-100m"])
    ecd = next(line for line in md.splitlines() if "ECD" in line and "| ring" in line)
    assert "3 diverged" in ecd and "diverges" in ecd and "diverged (0/3)" in ecd
    allreduce = next(line for line in md.splitlines() if line.startswith("| all-reduce")
                     and "4" in [c.strip() for c in line.split("|")])
    # final accuracy 0.1 + 0.82 (1 - e^-4) + 0.002 seed, in %: 90.50, 90.70, 90.90
    assert "90.70 ± 0.20" in allreduce and "| 3 (3/3) " in allreduce
    from analysis.summary import cell_summary

    cells = cell_summary(summary.assign(gamma=0.5, delta_measured=1.0, bits_per_step=1.0, final_gap=0.0, beta=1.0))
    md = cell_table_markdown(cells)
    assert "not reached" in md and "[" in md and md.count("\n") == len(cells) + 2


@pytest.mark.slow  # draws figures, PNG and PDF: `make test` runs it, test-fast does not
def test_report_has_tables_and_figure_links(points, summary, tmp_path, monkeypatch):
    monkeypatch.setattr(command, "load_tables", lambda d: (points, summary, ""))
    monkeypatch.setattr(report, "load_tables", lambda d, with_skipped=False: (points, summary, "", []))
    study = tmp_path / "scaling"
    study.mkdir()
    assert command.main([str(study)]) == 0
    index = json.loads((study / "figures" / "index.json").read_text())
    # no traces.csv (consensus) and one data partition (noniid_effect): the other figures are drawn (methods:
    # the fixture has >= 4 methods at one task, n and network)
    assert set(index) == {"accuracy_curves", "gap_vs_nodes", "accuracy_vs_spectral_gap", "time_to_accuracy",
                          "lag_vs_consensus", "methods"}
    assert report.main([str(study)]) == 0
    md = (study / "report.md").read_text()
    assert md.startswith("# scaling:")
    assert "| compression | Choco-SGD | ECD-PSGD |" in md  # Table 1
    assert "| method" in md and "diverged (0/3)" in md  # per-cell table
    for name, caption in index.items():
        assert f"![{name}](figures/{name}.png)" in md and caption in md


def test_figures_only_one_keeps_the_other_captions(points, summary, tmp_path, monkeypatch):
    monkeypatch.setattr(command, "load_tables", lambda d: (points, summary, ""))
    assert command.main([str(tmp_path), "--only", "gap_vs_nodes"]) == 0
    # no traces.csv: consensus is not drawn, which, asked for by name, is an error (the figure's pipeline job fails)
    assert command.main([str(tmp_path), "--only", "time_to_accuracy", "consensus"]) == 1
    index = json.loads((tmp_path / "figures" / "index.json").read_text())
    assert set(index) == {"gap_vs_nodes", "time_to_accuracy"}


def test_missing_directory_exits_2(tmp_path, capsys):
    assert report.main([str(tmp_path / "nope")]) == 2
    assert command.main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "nope" in err


@pytest.mark.slow  # two child processes; the fast set draws the report in-process (test_report_has_tables_...)
def test_cli_end_to_end_on_run_directories(tmp_path):
    study = tmp_path / "table1"
    for algorithm, compressor, accs in [("allreduce", "none", [0.92, 0.93]), ("choco", "sign", [0.90, 0.91]),
                                        ("dcd", "sign", [0.85, 0.86]), ("dpsgd", "none", [0.91, 0.9])]:
        make_cell(study / "runs", f"{algorithm}-{compressor}", accs, algorithm=algorithm, compressor=compressor)
    make_run_traces(study / "consensus" / "exact" / "traces.csv")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLCONFIGDIR": str(tmp_path / "mpl")}
    for command in (["figures", str(study)], ["report", str(study)]):
        done = subprocess.run([sys.executable, "-m", "analysis", *command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "report.md" in out
    index = json.loads((study / "figures" / "index.json").read_text())
    assert {"accuracy_curves", "consensus", "time_to_accuracy"} <= set(index)
    md = (study / "report.md").read_text()
    assert "| compression | Choco-SGD | DCD-PSGD |" in md and "| sign | 90.50 ± 0.71 | 85.50 ± 0.71 |" in md
    assert "![consensus](figures/consensus.png)" in md
    tex = (study / "table1.tex").read_text()  # Table 1 in LaTeX next to the report
    assert "\\toprule" in tex and r"85.50 $\pm$ 0.71" in tex


def make_run_traces(path: Path):
    path.parent.mkdir(parents=True)
    rows = [{"method": m, "gamma": g, "step": s, "rel_error": 0.5 ** (s * k), "bits_per_worker": s * b,
             "topology": "ring", "nodes": 8, "spectral_gap": 0.195, "dim": 100, "seed": 0}
            for m, g, k, b in [("exact", 1.0, 1.0, 3200), ("sign", 0.4, 0.3, 132)] for s in range(0, 40, 4)]
    pd.DataFrame(rows).to_csv(path, index=False)


def test_time_to_accuracy_orders_the_presets_by_the_bandwidth_their_runs_state(tmp_path, monkeypatch):
    from analysis.figures import time_to_accuracy as tta

    rows = []
    for network, bandwidth in (("a-slow", 1e6), ("b-fast", 1e10), ("c-middle", 1e8)):
        run = tmp_path / network
        run.mkdir()
        (run / "run.json").write_text(json.dumps({"network": {"name": network, "bandwidth_bps": bandwidth}}))
        rows.append({"network": network, "path": str(run)})
    assert tta.network_order(pd.DataFrame(rows)) == ["b-fast", "c-middle", "a-slow"]  # not by name
    (tmp_path / "c-middle" / "run.json").write_text("{")  # a run that does not say: after those that do
    assert tta.network_order(pd.DataFrame(rows)) == ["b-fast", "a-slow", "c-middle"]


def test_accuracy_curves_name_the_data_partition_they_show(points, summary, monkeypatch, tmp_path):
    kept = drawn_figure(monkeypatch, accuracy_curves)
    sorted_too = pd.concat([points, points.assign(data="sorted", run_id=points["run_id"] + "-sorted")])
    _, caption = accuracy_curves.draw(tmp_path, sorted_too, summary, tmp_path / "a")
    assert "data partition shuffle" in caption and kept[0]._suptitle.get_text().endswith("data: shuffle")
