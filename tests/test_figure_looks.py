"""What a reader sees: methods told apart by colour at a glance (CIE76 ΔE between the looks of every two methods),
and exact methods apart from compressed ones. (What each figure draws: test_analysis_figures.py.)"""
import itertools
import math
from pathlib import Path

import pytest
import yaml

from analysis import labels

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


def test_every_two_methods_of_table1_differ_in_colour_and_none_compressed_passes_for_an_exact_one():
    names = table1_methods()
    assert len(names) == 35
    # the accuracy curves draw all-reduce, D-PSGD and Choco's eleven compressors in one figure
    drawn = [n for n in names if labels._METHODS[n][0] in ("allreduce", "dpsgd", "choco")]
    assert len(drawn) == 13 and closest(drawn)[0] >= APART, closest(drawn)  # 11 shades of one blue had 2.3
    assert closest(names)[0] >= 20.0, closest(names)  # all 35, should a figure draw every one: still apart
    compressed = [n for n in names if not labels.exact(*labels._METHODS[n])]
    assert len(compressed) == 33
    for name in compressed:
        colour = labels.style(name)["color"]
        # neither navy nor near black beside all-reduce, nor grey beside D-PSGD; dashes are the exact methods'
        assert min(labels.colour_difference(colour, grey) for grey in EXACT_GREYS) >= APART, name
        assert labels.style(name)["linestyle"] == "-"
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

