"""Names and looks of methods in every table and figure: one place.

An algorithm's display name and whether it compresses are written by bench into each run's
``run.json`` (``"algorithm": {"name", "label", "compresses", ...}``); the loader hands them to
``learn`` so analysis never keeps its own list of algorithms. A run recorded before those fields
existed shows its registry name.

A compressor's name in figures, its family, its place in legends and its marker are bench's too: each
operator declares them and run.json's ``"compressor"`` object carries them (``label``, ``family``, ``order``,
``marker``), which the loader hands to ``learn_compressor``; a run recorded before those fields existed is
shown as bench's five operators were then (``_BEFORE``), so old results look as they always did.

A method is an (algorithm, compressor) pair. Its colour and marker come from ``style``: the marker is
the compressor's; the colour is the method's own (analysis/colours.py: one for each method the suite's studies run,
the same in every figure of every study), or, for a method the suite does not declare (one's own), the first of a
qualitative palette far (CIE ΔE) from the colours of the study's other methods and from the exact methods'
black and greys. Legends list all-reduce, D-PSGD, then the compressed methods by algorithm and compressor.
The colours themselves, the palette and the topologies' glyphs are analysis/colours.py's; units and the counts of
bits, analysis/units.py's.
"""
from __future__ import annotations

import functools
import math

import pandas as pd

from analysis.colours import EXACT_COLOURS, EXACT_LOOKS, METHOD_COLOURS, PALETTE, pick
from analysis.colours import colour_difference, lab as _lab  # noqa: F401 (API)

# name -> {"label": str, "compresses": bool, "own_compression": bool}, from the runs' own descriptions
_ALGORITHMS: dict[str, dict] = {}
# method label -> (algorithm, compressor spec), for every method seen by method_label
_METHODS: dict[str, tuple[str, str]] = {}
# compressor spec as a run's config writes it -> what its run.json says of the operator: label, family,
# order ([rank, size]) and marker (absent: no fixed marker)
_COMPRESSORS: dict[str, dict] = {}

# how runs recorded before bench described its compressors show them, by family (the part of a spec before
# ':'): the marker and legend rank bench's operators declare now, so old and new runs look alike
_BEFORE = {"none": ("o", 0), "qsgd": ("v", 1), "rand": ("^", 2), "top": ("s", 3), "sign": ("D", 4)}
_LAST = 5  # the legend rank of a compressor neither described nor in _BEFORE
_OTHER_MARKERS = ["P", "X", "h", "<", ">", "p", "*"]


def reset() -> None:
    """Forget every learned algorithm, compressor and method (a fresh process)."""
    _ALGORITHMS.clear()
    _METHODS.clear()
    _COMPRESSORS.clear()
    _looks.cache_clear()


def known() -> dict:
    """What the loaded runs said of their algorithms and compressors, in the order learned (looks follow it):
    stored beside a study's tables (analysis.docs), so they are shown as the runs showed them."""
    return {"algorithms": {k: dict(v) for k, v in _ALGORITHMS.items()},
            "compressors": {k: {**v, **({"order": list(v["order"])} if "order" in v else {})}
                            for k, v in _COMPRESSORS.items()},
            "methods": [list(pair) for pair in _METHODS.values()]}  # (algorithm, compressor): their colours


def learn_known(said: dict) -> None:
    """``known()``'s dictionary learned again, as if its runs had been loaded."""
    for name, description in said.get("algorithms", {}).items():
        learn(name, description)
    for spec, description in said.get("compressors", {}).items():
        learn_compressor(spec, description)
    for algorithm, compressor in said.get("methods", []):
        method_label(algorithm, compressor)


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
        if isinstance(description.get("headline"), bool):
            known["headline"] = description["headline"]
        slope = description.get("consensus_slope", "unsaid")
        if slope is None or (isinstance(slope, (int, float)) and not isinstance(slope, bool)):
            known["consensus_slope"] = slope


# what runs written before run.json said so are taken to say (the paper's method, its bound's slope)
_METHOD_FACTS_BEFORE = {"choco": {"headline": True, "consensus_slope": -4.0}}


def _fact(name, key):
    known = _ALGORITHMS.get(str(name), {})
    return known[key] if key in known else _METHOD_FACTS_BEFORE.get(str(name), {}).get(key)


def headline(name) -> bool:
    """Whether the algorithm is drawn beside the exact references where a figure has room for few methods."""
    return bool(_fact(name, "headline"))


def consensus_slope(name) -> float | None:
    """The slope in ρ of the algorithm's consensus-distance bound, as its run.json says (None: no bound)."""
    return _fact(name, "consensus_slope")


def learn_compressor(spec, description=None) -> None:
    """Remember how a run's compressor ``spec`` (as its config writes it) is shown, from its run.json's
    "compressor" object: ``label``, ``family``, ``order`` ([rank, size]) and ``marker``."""
    if not isinstance(spec, str) or not spec or not isinstance(description, dict):
        return
    said = {key: description[key] for key in ("label", "family", "marker")
            if isinstance(description.get(key), str) and description[key]}
    order = description.get("order")
    if isinstance(order, (list, tuple)) and len(order) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in order):
        said["order"] = (order[0], float(order[1]))
    if said and _COMPRESSORS.get(spec) != said:
        _COMPRESSORS[spec] = said
        _looks.cache_clear()  # markers depend on what is known of the compressors


def _described(spec) -> dict | None:
    """What a run said of ``spec``'s looks, or None (a run recorded before bench said it)."""
    return _COMPRESSORS.get(str(spec))


def algorithm_label(name) -> str:
    return _ALGORITHMS.get(str(name), {}).get("label", str(name))


def compresses(name, compressor="none") -> bool:
    """Whether the algorithm sends compressed messages (unknown: whether its compressor is one)."""
    said = _ALGORITHMS.get(str(name), {}).get("compresses")
    return said if said is not None else str(compressor) not in ("none", "nan")


def compressor_label(spec) -> str:
    """Paper-style name of a compressor spec: ``top:0.01`` -> ``top 1%``, ``qsgd:4`` -> ``QSGD 4-bit``, as the
    run described it (then the options the spec spells out: ``random 1%, unbiased``)."""
    head, _, options = str(spec).partition(",")
    name, _, arg = head.partition(":")
    said = (_described(spec) or {}).get("label")
    if said:
        label = said
    elif name in ("top", "rand") and arg:
        label = f"{'top' if name == 'top' else 'random'} {float(arg) * 100:g}%"
    elif name == "qsgd" and arg:
        label = f"QSGD {arg}-bit"
    else:
        label = head
    return f"{label}, {options.replace('=true', '').replace(',', ', ')}" if options else label


def compressor_order(spec) -> tuple:
    """Legend order, as the runs describe their compressors: the paper's none, QSGD by bits, random and top
    by kept fraction (descending), sign, then others."""
    said = (_described(spec) or {}).get("order")
    if said is not None:
        return (said[0], said[1], str(spec))
    name, _, arg = str(spec).partition(",")[0].partition(":")
    rank = _BEFORE[name][1] if name in _BEFORE else _LAST
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
    declared = list(EXACT_LOOKS).index(f"{algorithm}/{compressor}") if f"{algorithm}/{compressor}" in EXACT_LOOKS \
        else len(EXACT_LOOKS)  # all-reduce, D-PSGD, A-DPSGD, then other exact ones by name
    return (0 if exact_method else 1, declared, algorithm_label(algorithm).lower(), compressor_order(compressor),
            label)


def with_methods(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out["method"] = [method_label(a, c) for a, c in zip(out["algorithm"], out["compressor"].astype(str))]
    return out


def _family(compressor: str) -> str:
    return (_described(compressor) or {}).get("family") or compressor.partition(",")[0].partition(":")[0]


def _fixed_marker(compressor: str) -> str | None:
    """The marker the compressor's run declared, else its family's (one a run of the family declared, or
    _BEFORE's), else None: the family takes the next of _OTHER_MARKERS."""
    said = (_described(compressor) or {}).get("marker")
    if said:
        return said
    family = _family(compressor)
    kin = [d["marker"] for d in _COMPRESSORS.values() if d.get("family") == family and d.get("marker")]
    return kin[0] if kin else _BEFORE[family][0] if family in _BEFORE else None


def _marker(compressor: str, others: list[str]) -> str:
    fixed = _fixed_marker(compressor)
    if fixed is not None:
        return fixed
    family = _family(compressor)
    return _OTHER_MARKERS[others.index(family) % len(_OTHER_MARKERS)] if family in others else "o"


def _declared(algorithm: str, compressor: str, exact_method: bool) -> tuple[str, object] | None:
    """(colour, line style) the suite declares for the method (colours.py), or None."""
    key = f"{algorithm}/{compressor}"
    if exact_method:
        return EXACT_LOOKS.get(key)
    return (METHOD_COLOURS[key], "-") if key in METHOD_COLOURS else None


@functools.lru_cache(maxsize=64)
def _looks(study: tuple, extra: tuple = ()) -> dict:
    """label -> look of every method of ``study`` ((label, algorithm, compressor, exact), in legend
    order), then of ``extra`` (another experiment's, after the study's). A method the suite declares has its
    own colour whatever else is drawn; any other takes, in turn, a colour DISTINCT from the greys and every
    colour taken before (exact ones: the palest grey, dotted)."""
    entries = study + extra
    families = [_family(c) for _, _, c, _ in entries if _fixed_marker(c) is None]
    others = sorted(set(families[:len(study)])) + list(dict.fromkeys(families[len(study):]))
    looks = {}
    for label, algorithm, compressor, exact_method in entries:
        declared = _declared(algorithm, compressor, exact_method)
        if declared:
            looks[label] = {"color": declared[0], "marker": "o" if exact_method else _marker(compressor, others),
                            "linestyle": declared[1]}
    taken = EXACT_COLOURS + [look["color"] for look in looks.values()]
    for label, algorithm, compressor, exact_method in entries:
        if label in looks:
            continue
        if exact_method:
            looks[label] = {"color": EXACT_COLOURS[-1], "marker": "o", "linestyle": ":"}
            continue
        taken.append(pick(PALETTE, taken))
        looks[label] = {"color": taken[-1], "marker": _marker(compressor, others), "linestyle": "-"}
    return looks


def _study() -> tuple:
    return tuple((m, *_METHODS[m], exact(*_METHODS[m])) for m in sorted(_METHODS, key=method_sort_key))


def style(label: str) -> dict:
    """``color``, ``marker`` and ``linestyle`` of a method label: black or a grey, with dashes, for an exact
    method; else the compressor's marker and the method's own colour (_looks), the same in every figure."""
    return dict(_looks(_study()).get(label, {"color": "#333333", "marker": "o", "linestyle": "-"}))


def colours(labels) -> dict:
    """label -> colour of each method label (for seaborn's ``palette=``)."""
    return {label: style(label)["color"] for label in labels}


def styles_with(pairs) -> dict:
    """(algorithm, compressor) -> style of each pair, for a figure of another experiment (the
    consensus one: Choco-Gossip without training) that shows methods the study may not have run. A
    method of the study keeps its own look. One it lacks is not added to the study's methods (their
    looks stay as they are) and gets a look no method of the study has: a colour taken after theirs
    by the same rule (a new algorithm: from a hue no algorithm of the study has), its compressor's marker."""
    pairs = list(dict.fromkeys((str(a), str(c)) for a, c in pairs))
    known = dict(_METHODS)
    try:
        labels = {pair: method_label(*pair) for pair in pairs}
    finally:
        _METHODS.clear()
        _METHODS.update(known)
    new = {label: (label, *pair, exact(*pair)) for pair, label in labels.items() if label not in known}
    looks = _looks(_study(), tuple(new.values()))
    return {pair: dict(looks[label]) for pair, label in labels.items()}
