"""What a reader sees: methods told apart by colour, bars only where their length means something, and
tick labels that never collide. Measured on the looks and on the drawn matplotlib objects."""
import colorsys
import itertools
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle

from analysis import labels
from analysis.figures import accuracy_vs_spectral_gap, time_to_accuracy

ROOT = Path(__file__).resolve().parents[1]
EXACT_GREYS = ["#000000", "#7f7f7f", "#4d4d4d", "#b0b0b0"]  # all-reduce's black and the exact methods' greys
APART = 25.0  # CIE76 ΔE: two lines or markers of one figure read as two colours at a glance
# compressor specs beyond Table 1's eleven, for a study with sixteen
MORE_COMPRESSORS = ["top:0.2", "rand:0.2", "qsgd:6", "top:0.05", "rand:0.05"]


def table1_methods() -> list[str]:
    """Every method of config/table1.yaml, as the study's figures learn them."""
    study = yaml.safe_load((ROOT / "config" / "table1.yaml").read_text())
    pairs = [tuple(m.split("/")) for block in study["blocks"].values() for m in block["method"]]
    return list(dict.fromkeys(labels.method_label(a, c) for a, c in pairs))


def closest(names) -> tuple[float, str, str]:
    """The least colour difference between two of ``names``, and which two."""
    colour = {n: labels.style(n)["color"] for n in names}
    return min((labels.colour_difference(colour[a], colour[b]), a, b) for a, b in itertools.combinations(names, 2))


def test_colour_difference_is_cie76_in_lab():
    assert labels.colour_difference("white", "black") == pytest.approx(100.0, abs=0.01)
    # sRGB red is L*a*b* (53.24, 80.09, 67.20)
    assert labels.colour_difference("#ff0000", "black") == pytest.approx(math.hypot(53.24, 80.09, 67.20), abs=0.05)
    assert labels.colour_difference("#0173b2", (1 / 255, 115 / 255, 178 / 255)) == pytest.approx(0.0)


def test_every_two_methods_of_table1_differ_in_colour():
    names = table1_methods()
    assert len(names) == 35
    # the accuracy curves draw all-reduce, D-PSGD and Choco's eleven compressors in one figure
    drawn = [n for n in names if labels._METHODS[n][0] in ("allreduce", "dpsgd", "choco")]
    assert len(drawn) == 13
    worst = closest(drawn)
    assert worst[0] >= APART, worst  # eleven shades of one blue had 2.3 (top 1% against sign)
    # all 35 methods of the study, should a figure draw every one: still apart
    worst = closest(names)
    assert worst[0] >= 20.0, worst


def test_no_compressed_method_passes_for_an_exact_one():
    names = table1_methods()
    compressed = [n for n in names if not labels.exact(*labels._METHODS[n])]
    assert len(compressed) == 33
    for name in compressed:
        colour = labels.style(name)["color"]
        # neither navy nor near black beside all-reduce, nor grey beside D-PSGD
        assert min(labels.colour_difference(colour, grey) for grey in EXACT_GREYS) >= APART, name
        assert labels.style(name)["linestyle"] == "-"  # dashes are the exact methods'
    assert [labels.style(n)["color"] for n in ("all-reduce", "D-PSGD")] == EXACT_GREYS[:2]


@pytest.mark.parametrize("algorithms, compressors", [(1, 16), (2, 7), (3, 4), (4, 3), (7, 2), (12, 1)])
def test_up_to_sixteen_compressed_methods_of_any_mix_stay_apart(algorithms, compressors):
    every = [m.split("/")[1] for m in yaml.safe_load((ROOT / "config" / "table1.yaml").read_text())
             ["blocks"]["compressed"]["method"] if m.startswith("choco/")] + MORE_COMPRESSORS
    names = [labels.method_label("allreduce", "none"), labels.method_label("dpsgd", "none")]
    for k in range(algorithms):
        labels.learn(f"new{k}", {"label": f"New-{k}", "compresses": True})
        names += [labels.method_label(f"new{k}", c) for c in every[:compressors]]
    worst = closest(names)
    assert worst[0] >= APART, worst


def test_an_algorithm_with_two_compressors_keeps_its_hue_in_two_shades():
    names = [labels.method_label(a, c) for a, c in
             [("allreduce", "none"), ("choco", "sign"), ("choco", "top:0.01"), ("dcd", "qsgd:8")]]
    choco = [labels.style(n)["color"] for n in names[1:3]]
    assert labels.colour_difference(*choco) >= APART
    hues = [colorsys.rgb_to_hls(*to_rgb(c))[0] for c in choco]
    assert abs(hues[0] - hues[1]) < 0.02  # one hue, two lightnesses


def tta_summary(times: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs of one preset (3 seeds a method): method -> seed times to target, None for a seed that did
    not reach (censored at 8 s); and the evaluation points that say where each run ended."""
    rows, points = [], []
    for (algorithm, compressor), seeds in times.items():
        for seed, t in enumerate(seeds):
            run_id = f"{algorithm}-{compressor}-s{seed}"
            rows.append({"run_id": run_id, "algorithm": algorithm, "compressor": compressor, "seed": seed,
                         "network": "p2p-100m", "status": "completed",
                         "tta_status": "reached" if t is not None else "censored",
                         "time_to_target_s": t if t is not None else math.inf})
            points.append({"run_id": run_id, "time_s": 8.0 if t is None else 3 * t})
    return pd.DataFrame(rows), pd.DataFrame(points)


def drawn(monkeypatch, module):
    kept = []
    monkeypatch.setattr(module, "save_figure", lambda fig, out_stem: kept.append(fig) or [])
    return kept


def test_time_to_accuracy_bars_start_at_zero_on_a_linear_axis(monkeypatch):
    kept = drawn(monkeypatch, time_to_accuracy)
    summary, points = tta_summary({("allreduce", "none"): [2.0, 2.2, 2.4], ("choco", "sign"): [1.0, 1.1, 1.3],
                                   ("dpsgd", "none"): [None, None, 5.0]})
    time_to_accuracy.plot_time_to_accuracy(summary, Path("unused"), points=points)
    ax = kept[0].axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 3 and all(bar.get_y() == 0 and bar.get_height() > 0 for bar in bars)
    heights = {bar.get_gid(): bar.get_height() for bar in bars}
    assert heights["reached:p2p-100m:Choco-SGD (sign)"] == pytest.approx(1.1)
    assert heights["unreached:p2p-100m:D-PSGD"] == pytest.approx(8.0)  # censored: up to where the runs ended


def test_time_to_accuracy_spanning_decades_draws_dots_on_a_log_axis(monkeypatch):
    kept = drawn(monkeypatch, time_to_accuracy)
    summary, points = tta_summary({("allreduce", "none"): [200.0, 240.0, 300.0], ("choco", "sign"): [0.5, 0.6, 0.8],
                                   ("dpsgd", "none"): [None, None, 50.0]})
    time_to_accuracy.plot_time_to_accuracy(summary, Path("unused"), points=points)
    ax = kept[0].axes[0]
    assert ax.get_yscale() == "log"
    assert not [p for p in ax.patches if isinstance(p, Rectangle)]  # no bar starting at an arbitrary floor
    choco = labels.style("Choco-SGD (sign)")
    dot = next(line for line in ax.get_lines() if line.get_gid() == "reached:p2p-100m:Choco-SGD (sign)")
    assert list(dot.get_ydata()) == [pytest.approx(0.6)] and dot.get_marker() == choco["marker"]
    seeds = next(line for line in ax.get_lines() if line.get_gid() == "seeds:p2p-100m:Choco-SGD (sign)")
    assert list(seeds.get_ydata()) == [pytest.approx(0.5), pytest.approx(0.8)]  # the seeds' min–max
    # the unreached target is still shown: a mark where its runs ended, and what happened
    mark = next(line for line in ax.get_lines() if line.get_gid() == "unreached-mark:p2p-100m:D-PSGD")
    assert mark.get_ydata()[0] == pytest.approx(8.0) and mark.get_marker() == time_to_accuracy.BEYOND
    assert any("2 censored: > 8 s" in t.get_text() for t in ax.texts)
    low, high = ax.get_ylim()
    assert low < 0.5 and high > 300


def spectral_summary(rhos: dict) -> pd.DataFrame:
    """Two seeds of D-PSGD and sign-Choco on each topology (its ρ), and all-reduce."""
    rows = []
    for (topology, rho), algorithm, seed in itertools.product(rhos.items(), ("dpsgd", "choco"), (0, 1)):
        rows.append({"run_id": f"{topology}-{algorithm}-{seed}", "algorithm": algorithm, "seed": seed,
                     "compressor": "sign" if algorithm == "choco" else "none", "topology": topology,
                     "status": "completed", "spectral_gap": rho, "final_test_acc": 0.6 + 0.1 * rho + 0.01 * seed,
                     "final_consensus_distance": 1e-3 / rho})
    rows.append({"run_id": "ar", "algorithm": "allreduce", "compressor": "none", "topology": "ring", "seed": 0,
                 "status": "completed", "spectral_gap": 1.0, "final_test_acc": 0.7, "final_consensus_distance": 0.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("rhos", [
    # n = 16: the exponential graph beside the torus, Erdős–Rényi beside both; complete at 1
    {"ring": 0.0507, "erdos-renyi:0.3": 0.174, "torus": 0.4, "exponential": 0.5, "complete": 1.0},
    # three close ρ and a long name: three rows
    {"ring": 0.05, "erdos-renyi:0.35": 0.30, "erdos-renyi:0.4": 0.33, "erdos-renyi:0.45": 0.36, "complete": 1.0},
])
def test_spectral_gap_tick_labels_never_overlap(rhos, monkeypatch):
    kept = drawn(monkeypatch, accuracy_vs_spectral_gap)
    accuracy_vs_spectral_gap.plot_accuracy_vs_spectral_gap(spectral_summary(rhos), Path("unused"))
    fig = kept[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        shown = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        assert len(shown) == len(rhos)  # every topology named at its ρ
        boxes = [t.get_window_extent(renderer) for t in shown]
        for (a, box_a), (b, box_b) in itertools.combinations(zip(shown, boxes), 2):
            assert not box_a.overlaps(box_b), (a.get_text(), b.get_text())


def test_the_spectral_figure_adds_a_panel_against_the_effective_neighbours_where_runs_report_them(monkeypatch):
    rhos = {"ring": 0.051, "star": 0.062, "torus": 0.4, "complete": 1.0, "base:1": 1.0}
    n_eff = {"ring": 6.6, "star": 2.32, "torus": 12.23, "complete": 16.0, "base:1": 7.8}
    summary = spectral_summary(rhos)
    summary["n_eff"] = summary["topology"].map(n_eff)
    kept = drawn(monkeypatch, accuracy_vs_spectral_gap)
    accuracy_vs_spectral_gap.plot_accuracy_vs_spectral_gap(summary, Path("unused"))
    fig = kept[0]
    assert len(fig.axes) == 3
    panel = fig.axes[2]
    assert "n_W" in panel.get_xlabel()
    assert sorted(t.get_text() for t in panel.texts) == sorted(rhos)  # each graph named once
    # each method's points sit at the graphs' n_W with their mean accuracies
    xs = sorted(x for line in panel.lines for x in line.get_xdata() if line.get_marker() not in (None, "None", ""))
    assert sorted(set(xs)) == sorted(n_eff.values())
    kept.clear()  # runs that predate run.json's n_eff: the two panels of ρ alone
    accuracy_vs_spectral_gap.plot_accuracy_vs_spectral_gap(spectral_summary(rhos), Path("unused"))
    assert len(kept[0].axes) == 2
