"""Names and looks of methods in every table and figure: one place.

An algorithm's display name and whether it compresses are written by bench into each run's
``run.json`` (``"algorithm": {"name", "label", "compresses", ...}``); the loader hands them to
``learn`` so analysis never keeps its own list of algorithms. A run recorded before those fields
existed shows its registry name.

A method is an (algorithm, compressor) pair. Its colour and marker come from ``style``: the hue is
the algorithm's, the shade and the marker the compressor's, assigned in a fixed order over every
method learned from the loaded runs, so one method looks the same in every figure of a study.
"""
from __future__ import annotations

import colorsys

import pandas as pd

# name -> {"label": str, "compresses": bool, "own_compression": bool}, from the runs' own descriptions
_ALGORITHMS: dict[str, dict] = {}
# method label -> (algorithm, compressor spec), for every method seen by method_label
_METHODS: dict[str, tuple[str, str]] = {}

# hues of the compressing algorithms (colour-blind safe, after seaborn's "colorblind"), in learned order
_HUES = ["#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#56b4e9", "#ece133", "#fbafe4"]
_EXACT_COLOURS = ["#000000", "#7f7f7f", "#4d4d4d", "#b0b0b0"]  # methods that send exact models
_EXACT_DASHES = ["-", "--", "-.", ":"]
# marker of each compressor family (the part of a spec before ':')
_MARKERS = {"none": "o", "sign": "D", "top": "s", "rand": "^", "qsgd": "v"}
_OTHER_MARKERS = ["P", "X", "h", "<", ">", "p", "*"]


def reset() -> None:
    """Forget every learned algorithm and method (a fresh process)."""
    _ALGORITHMS.clear()
    _METHODS.clear()


def learn(name, description=None) -> None:
    """Remember an algorithm's ``label`` and ``compresses`` from a run.json's "algorithm" object."""
    if not isinstance(name, str) or not name:
        return
    known = _ALGORITHMS.setdefault(name, {"label": name, "compresses": None})
    if isinstance(description, dict):
        if isinstance(description.get("label"), str) and description["label"]:
            known["label"] = description["label"]
        if isinstance(description.get("compresses"), bool):
            known["compresses"] = description["compresses"]
        if isinstance(description.get("own_compression"), bool):
            known["own_compression"] = description["own_compression"]
        if isinstance(description.get("centralized"), bool):
            known["centralized"] = description["centralized"]


def algorithm_label(name) -> str:
    return _ALGORITHMS.get(str(name), {}).get("label", str(name))


def compresses(name, compressor="none") -> bool:
    """Whether the algorithm sends compressed messages (unknown: whether its compressor is one)."""
    said = _ALGORITHMS.get(str(name), {}).get("compresses")
    return said if said is not None else str(compressor) not in ("none", "nan")


def compressor_label(spec) -> str:
    """Paper-style name of a compressor spec: ``top:0.01`` -> ``top 1%``, ``qsgd:4`` -> ``QSGD 4-bit``."""
    head, _, options = str(spec).partition(",")
    name, _, arg = head.partition(":")
    if name in ("top", "rand") and arg:
        label = f"{'top' if name == 'top' else 'random'} {float(arg) * 100:g}%"
    elif name == "qsgd" and arg:
        label = f"QSGD {arg}-bit"
    else:
        label = head
    return f"{label}, {options.replace('=true', '').replace(',', ', ')}" if options else label


def compressor_order(spec) -> tuple:
    """Paper order: none, QSGD by bits, random and top by kept fraction (descending), sign, others."""
    name, _, arg = str(spec).partition(",")[0].partition(":")
    rank = {"none": 0, "qsgd": 1, "rand": 2, "top": 3, "sign": 4}.get(name, 5)
    try:
        size = -float(arg)
    except ValueError:
        size = 0.0
    return (rank, size, str(spec))


def centralized(name) -> bool:
    """Whether every worker applies the same update (all models equal, no graph used), as the run says."""
    return bool(_ALGORITHMS.get(str(name), {}).get("centralized"))


def own_compression(name) -> bool:
    """Whether the algorithm compresses by its own scheme (PowerSGD's low rank): no compressor to name."""
    return bool(_ALGORITHMS.get(str(name), {}).get("own_compression"))


def exact(name, compressor="none") -> bool:
    """Whether the method sends exact models (all-reduce, D-PSGD): greys, first in legends."""
    return not compresses(name, compressor) and not own_compression(name)


def method_label(algorithm, compressor="none") -> str:
    """``choco``, ``sign`` -> ``Choco-SGD (sign)``; a method that sends exact models, or compresses by
    its own scheme, keeps its bare name."""
    name = algorithm_label(algorithm)
    bare = (not compresses(algorithm, compressor) or own_compression(algorithm)) \
        and str(compressor) in ("none", "nan")
    label = name if bare else f"{name} ({compressor_label(compressor)})"
    _METHODS.setdefault(label, (str(algorithm), str(compressor)))
    return label


def method_sort_key(label: str) -> tuple:
    """Legend order: the methods that send exact models (bare names) first, then the compressed ones,
    each group by algorithm label and then in the paper's compressor order."""
    algorithm, compressor = _METHODS.get(label, (label.split(" (")[0], "none"))
    exact_method = exact(algorithm, compressor) if label in _METHODS else " (" not in label
    return (0 if exact_method else 1, algorithm_label(algorithm).lower(), compressor_order(compressor), label)


def with_methods(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out["method"] = [method_label(a, c) for a, c in zip(out["algorithm"], out["compressor"].astype(str))]
    return out


def _shade(hex_colour: str, k: int, of: int) -> tuple[float, float, float]:
    """The k-th of ``of`` shades of a hue, from darker to lighter (k = 0 of 1: the hue itself). Past three
    shades (one algorithm with many compressors, as in Table 1) the hue also turns a little from the
    first shade to the last, so that neighbours in the order stay apart."""
    r, g, b = (int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    h, lightness, s = colorsys.rgb_to_hls(r, g, b)
    if of > 1:
        t = k / (of - 1)
        spread = 0.18 if of <= 3 else 0.26
        lightness = min(0.82, max(0.18, lightness - spread + 2 * spread * t))
        if of > 3:
            h = (h + 0.16 * (t - 0.5)) % 1.0
    return colorsys.hls_to_rgb(h, lightness, s)


def _marker(compressor: str, others: list[str]) -> str:
    family = compressor.partition(",")[0].partition(":")[0]
    if family in _MARKERS:
        return _MARKERS[family]
    return _OTHER_MARKERS[others.index(family) % len(_OTHER_MARKERS)] if family in others else "o"


def style(label: str) -> dict:
    """``color``, ``marker`` and ``linestyle`` of a method label, the same in every figure: the
    hue by algorithm (greys for exact methods), the shade and marker by compressor."""
    methods = sorted(_METHODS, key=method_sort_key)
    algorithm, compressor = _METHODS.get(label, (label, "none"))
    def is_exact(m):
        return exact(*_METHODS[m])

    exact_ones = [a for a in dict.fromkeys(_METHODS[m][0] for m in methods if is_exact(m))]
    compressing = [a for a in dict.fromkeys(_METHODS[m][0] for m in methods if not is_exact(m))]
    others = sorted({_METHODS[m][1].partition(",")[0].partition(":")[0] for m in methods} - set(_MARKERS))
    if label in _METHODS and is_exact(label) and algorithm in exact_ones:
        k = exact_ones.index(algorithm)
        return {"color": _EXACT_COLOURS[k % len(_EXACT_COLOURS)], "marker": "o",
                "linestyle": _EXACT_DASHES[k % len(_EXACT_DASHES)]}
    if algorithm not in compressing:
        return {"color": "#333333", "marker": _marker(compressor, others), "linestyle": "-"}
    siblings = [m for m in methods if not is_exact(m) and _METHODS[m][0] == algorithm]
    hue = _HUES[compressing.index(algorithm) % len(_HUES)]
    return {"color": _shade(hue, siblings.index(label), len(siblings)), "marker": _marker(compressor, others),
            "linestyle": "-"}


def colours(labels) -> dict:
    """label -> colour of each method label (for seaborn's ``palette=``)."""
    return {label: style(label)["color"] for label in labels}


def styles_with(pairs) -> dict:
    """(algorithm, compressor) -> style of each pair, for a figure of another experiment (the
    consensus one: Choco-Gossip without training) that shows methods the study may not have run. A
    method of the study keeps its own look. One it lacks is not added to the study's methods (their
    looks stay as they are) and gets a look no method of the study has: its algorithm's hue (a hue
    no algorithm of the study has, for a new algorithm) in the shade farthest from the shades that
    algorithm's methods already use, and its compressor's marker."""
    pairs = list(dict.fromkeys((str(a), str(c)) for a, c in pairs))
    known = dict(_METHODS)
    try:
        labels = {pair: method_label(*pair) for pair in pairs}
    finally:
        _METHODS.clear()
        _METHODS.update(known)
    methods = sorted(known, key=method_sort_key)
    exact_ones = list(dict.fromkeys(known[m][0] for m in methods if exact(*known[m])))
    compressing = list(dict.fromkeys(known[m][0] for m in methods if not exact(*known[m])))
    new = {pair: label for pair, label in labels.items() if label not in known}
    exact_ones += [a for a in dict.fromkeys(a for a, c in new if exact(a, c)) if a not in exact_ones]
    compressing += [a for a in dict.fromkeys(a for a, c in new if not exact(a, c)) if a not in compressing]
    families = {c.partition(",")[0].partition(":")[0] for _, c in list(known.values()) + list(new)}
    others = sorted(families - set(_MARKERS))
    taken: dict[str, list[float]] = {}  # algorithm -> the shades (0 darkest .. 1 lightest) in use
    for algorithm in compressing:
        siblings = [m for m in methods if not exact(*known[m]) and known[m][0] == algorithm]
        taken[algorithm] = [k / (len(siblings) - 1) if len(siblings) > 1 else 0.5 for k in range(len(siblings))]
    looks = {}
    for pair, label in labels.items():
        algorithm, compressor = pair
        if label in known:
            looks[pair] = style(label)
        elif exact(algorithm, compressor):
            k = exact_ones.index(algorithm)
            looks[pair] = {"color": _EXACT_COLOURS[k % len(_EXACT_COLOURS)], "marker": "o",
                           "linestyle": _EXACT_DASHES[k % len(_EXACT_DASHES)]}
        else:
            used = taken[algorithm]
            shade = max((k / 20 for k in range(21)), key=lambda f: (min((abs(f - t) for t in used), default=1.0),
                                                                   -abs(f - 0.5)))
            used.append(shade)
            hue = _HUES[compressing.index(algorithm) % len(_HUES)]
            looks[pair] = {"color": _shade(hue, shade, 2), "marker": _marker(compressor, others), "linestyle": "-"}
    return looks


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


# -- which count of bits a table or figure shows (run.json's bits_count) ----------------------------------------
BITS_COUNTS = {
    "links": "Mbit a worker put on its links",
    "broadcast": "Mbit a worker transmitted (broadcast medium: one transmission per gossip message)",
    "message": "Mbit per worker, one per message whatever the degree (runs recorded before the per-link count)",
}


BITS_SHORT = {"links": "on links", "broadcast": "transmitted, broadcast medium", "message": "per message"}


def bits_counts(frame) -> list[str]:
    """The ``bits_count`` values of a table of runs or points (``links`` where the column is absent)."""
    if frame is None or "bits_count" not in frame:
        return ["links"]
    return sorted({str(c) for c in frame["bits_count"].dropna()}) or ["links"]


def bits_short(counts=("links",)) -> str:
    """A table header's note of the count: ``on links``, or the mix."""
    found = sorted(set(counts)) or ["links"]
    return " + ".join(BITS_SHORT.get(c, c) for c in found) + (" (MIXED)" if len(found) > 1 else "")


def bits_label(counts=("links",), unit: str = "Mbit") -> str:
    """What the bits axis of runs with these ``bits_count`` values shows; a mix is named as one."""
    found = sorted({str(c) for c in counts if isinstance(c, str)}) or ["links"]
    if len(found) > 1:
        return f"{unit} per worker (MIXED counts: {', '.join(found)}; compare within one count only)"
    text = BITS_COUNTS.get(found[0], f"{unit} per worker ({found[0]})")
    return text.replace("Mbit", unit, 1)

