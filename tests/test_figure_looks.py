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


def study_methods(config: Path) -> list[str]:
    """Every method of a study's config, as its figures learn them (a block's true options make a variant)."""
    labels._METHODS.clear()
    pairs = [("+".join([m.split("/")[0]] + [k for o in block.get("algorithm_options", [{}]) for k, v in o.items()
                                              if v is True]), m.split("/")[1])
             for block in yaml.safe_load(config.read_text()).get("blocks", {}).values() for m in block["method"]]
    return list(dict.fromkeys(labels.method_label(a, c) for a, c in pairs))


STUDIES = sorted(p for p in (ROOT / "config").glob("*.yaml") if "blocks" in p.read_text())


def closest(names) -> tuple[float, str, str]:
    """The least colour difference between two of ``names``, and which two."""
    colour = {n: labels.style(n)["color"] for n in names}
    return min(((labels.colour_difference(colour[a], colour[b]), a, b) for a, b in itertools.combinations(names, 2)),
               default=(math.inf, "", ""))


def test_colour_difference_is_cie76_in_lab():
    assert labels.colour_difference("white", "black") == pytest.approx(100.0, abs=0.01)
    # sRGB red is L*a*b* (53.24, 80.09, 67.20)
    assert labels.colour_difference("#ff0000", "black") == pytest.approx(math.hypot(53.24, 80.09, 67.20), abs=0.05)


def test_a_method_has_one_colour_in_every_study_and_the_methods_of_a_study_are_apart():
    seen = {}
    for config in STUDIES:
        names = study_methods(config)
        for name in names:  # the same colour whatever else the study holds (sign-Choco was pink, blue, brown)
            assert seen.setdefault(name, labels.style(name)["color"]) == labels.style(name)["color"], (config, name)
        compressed = [n for n in names if not labels.exact(*labels._METHODS[n])]
        for name in compressed:  # declared, neither near black beside all-reduce nor grey beside D-PSGD
            assert f"{'/'.join(labels._METHODS[name])}" in labels.METHOD_COLOURS, (config, name)
            assert min(labels.colour_difference(labels.style(name)["color"], g) for g in EXACT_GREYS) >= APART
            assert labels.style(name)["linestyle"] == "-"
        # Table 1's 33 (a figure draws 13 at most) 20 apart; any study of up to 16 methods (methods: 15) 25
        assert closest(compressed)[0] >= (APART if len(compressed) <= 16 else 20.0), (config, closest(compressed))
    assert [seen[n] for n in ("all-reduce", "D-PSGD")] == EXACT_GREYS[:2] and len(seen) == 47


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

