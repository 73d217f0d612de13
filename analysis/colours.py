"""How far apart two colours look: CIE L*a*b* (D65) of a matplotlib colour and the CIE76 difference ΔE, the
distance in L*a*b* (about 2 is just noticeable; analysis/labels.py keeps the methods of a figure 25 apart); the
colour of each method the suite declares, the palette a method it does not declare takes a colour from (pick), and
the glyph and line of each topology (topology_style)."""
from __future__ import annotations

import colorsys
import functools
import math

from matplotlib.colors import to_hex, to_rgb

_SRGB_TO_XYZ = [(0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505)]
_WHITE = (0.95047, 1.0, 1.08883)  # D65


@functools.lru_cache(maxsize=None)
def lab(colour) -> tuple[float, float, float]:
    """CIE L*a*b* (D65 white) of a matplotlib colour."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    xyz = [sum(m * c for m, c in zip(row, linear)) / white for row, white in zip(_SRGB_TO_XYZ, _WHITE)]
    f = [t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def colour_difference(a, b) -> float:
    """CIE76 ΔE of two colours, their distance in L*a*b*: about 2 is just noticeable."""
    return math.dist(lab(a), lab(b))


# The colour of each method the suite's studies run ("algorithm/compressor" as a study's `method:` writes it), the
# same in every figure of every study whatever else it holds. Chosen once, in this order, each the farthest (CIE76)
# from those before (every two at least 21 apart, Table 1's Choco-SGD row and the methods study's 15 methods 25):
# append a new study's methods at the end, never reorder (tests/test_figure_looks.py checks both).
EXACT_LOOKS = {"allreduce/none": ("#000000", "-"), "dpsgd/none": ("#7f7f7f", "--"), "adpsgd/none": ("#4d4d4d", "-.")}
METHOD_COLOURS = {
    "choco/sign": "#0173b2", "choco/top:0.01": "#de8f05", "deepsqueeze/sign": "#029e73", "powergossip/none": "#d55e00",
    "beer/sign": "#cc78bc", "cedas/qsgd:16": "#ca9161", "lead/qsgd:16": "#56b4e9", "choco+adagossip/sign": "#882255",
    "ef/sign": "#cc6677", "dgc/top:0.01": "#999933", "powersgd/none": "#ee3377", "docom/sign": "#ece133",
    "motef/sign": "#6000ff", "dcd/qsgd:8": "#00cc00", "ecd/qsgd:8": "#ff00df", "choco/qsgd:4": "#4040bf",
    "choco/qsgd:16": "#ff0020", "choco/qsgd:8": "#138613", "choco/qsgd:2": "#990099", "choco/rand:0.5": "#863e13",
    "choco/rand:0.1": "#668cff", "choco/rand:0.01": "#c666ff", "choco/top:0.5": "#b3192d", "choco/top:0.1": "#00cccc",
    "dcd/qsgd:16": "#ff66d9", "dcd/qsgd:4": "#00cc66", "dcd/qsgd:2": "#ff7966", "dcd/rand:0.5": "#8000cc",
    "dcd/rand:0.1": "#736026", "dcd/rand:0.01": "#267369", "dcd/top:0.5": "#334cff", "dcd/top:0.1": "#79b319",
    "dcd/top:0.01": "#4d7326", "dcd/sign": "#9966cc", "ecd/qsgd:16": "#ff009f", "ecd/qsgd:4": "#df00ff",
    "ecd/qsgd:2": "#8c96d9", "ecd/rand:0.5": "#1953b3", "ecd/rand:0.1": "#997300", "ecd/rand:0.01": "#338099",
    "ecd/top:0.5": "#ff334d", "ecd/top:0.1": "#b31979", "ecd/top:0.01": "#009fff", "ecd/sign": "#66cc80",
}

# the colours of a method the suite does not declare, in order of preference (after seaborn's "colorblind" and
# Paul Tol's muted and vibrant schemes), the palest (faint on white) last
PALETTE = ["#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#56b4e9", "#882255", "#117733",
           "#cc6677", "#44aa99", "#999933", "#aa4499", "#ee3377", "#cc3311", "#009988", "#ee7733", "#ece133",
           "#fbafe4", "#ddcc77", "#88ccee"]
EXACT_COLOURS = ["#000000", "#7f7f7f", "#4d4d4d", "#b0b0b0"]  # methods that send exact models
DISTINCT = 25.0  # CIE76 ΔE at which two colours read as two at a glance, lines and markers alike


def _usable(colours) -> list[str]:
    """Those of ``colours`` neither dark enough to pass for the black of all-reduce nor faint on white."""
    return [c for c in colours if 35 <= lab(c)[0] <= 75]


_FALLBACK = _usable(to_hex(colorsys.hls_to_rgb(h / 24, lightness, s)) for h in range(24)  # past the palette
                    for lightness in (0.4, 0.55, 0.7) for s in (0.6, 0.9))


def _room(colour: str, taken: list[str]) -> float:
    return min((colour_difference(colour, t) for t in taken), default=math.inf)


def pick(preferred: list[str], taken: list[str]) -> str:
    """The first of ``preferred`` DISTINCT from every colour ``taken``; failing that, of ``preferred``
    and _FALLBACK, the one farthest from its nearest taken colour."""
    return (next((c for c in preferred if _room(c, taken) >= DISTINCT), None)
            or max(preferred + _FALLBACK, key=lambda c: _room(c, taken)))


# glyph and line of each topology family (the part of a name before ':'), from sparse to dense; the
# figures that tell topologies apart (gap_vs_nodes, lag_vs_consensus, methods) draw each the same way
_TOPOLOGY_LOOKS = {"ring": ("o", "-"), "torus": ("s", "--"), "exponential": ("^", "-."),
                   "erdos-renyi": ("v", ":"), "complete": ("D", (0, (6, 2, 1, 2, 1, 2))),
                   "star": ("P", (0, (1, 1)))}
_OTHER_TOPOLOGY_LOOKS = [("X", (0, (8, 2))), ("h", (0, (3, 1, 1, 1))), ("*", (0, (2, 2))), ("<", "-"), (">", "--")]


def topology_style(topology, topologies=()) -> dict:
    """``marker`` and ``linestyle`` of a topology, the same in every figure that tells topologies
    apart. A family (the name before ':') has a fixed look; a family not listed, or a second member
    of one (``erdos-renyi:0.3`` beside ``erdos-renyi:0.5``), takes the next free look in the sorted
    order of ``topologies``."""
    name = str(topology)
    names = sorted({str(t) for t in topologies} | {name})
    first = {}
    for n in names:
        first.setdefault(n.partition(":")[0], n)
    fixed = {n for f, n in first.items() if f in _TOPOLOGY_LOOKS}
    if name in fixed:
        marker, linestyle = _TOPOLOGY_LOOKS[name.partition(":")[0]]
    else:
        others = [n for n in names if n not in fixed]
        marker, linestyle = _OTHER_TOPOLOGY_LOOKS[others.index(name) % len(_OTHER_TOPOLOGY_LOOKS)]
    return {"marker": marker, "linestyle": linestyle}
