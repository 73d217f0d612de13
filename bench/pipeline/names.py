"""The file names of a study's cells and tuning trials: spelt from their settings, bounded, one per training.

A cell's name spells its settings (choco-top0.01_ring8_lr=0.1) without what a file name should not hold
(colons, slashes, quotes). That spelling alone can give two cells one name: erdos-renyi:0.5 at n = 16 and
erdos-renyi:0.51 at n = 6 are both erdos-renyi0.516. So a spelling is kept only where it reads back to its
settings by the grammar below (``reads_back``); any other cell, and any name longer than MAX_NAME bytes, is
its spelling (cut short) + ``~`` + a digest of its exact settings, a character no spelling holds. Names that
read back are the names earlier versions gave, so the results of earlier studies keep their folders.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ..errors import BenchError

# bytes of a cell's name: a file name takes 255, and beside the cell's folder come <cell>_s<seed> (12 more),
# a run's .stale/<run>-<fingerprint>.<k> (about 26 more) and the writer's temporary files beside <cell>.yaml (27)
MAX_NAME = 200
DIGEST = 10  # hex digits of the settings' digest
MARK = "~"  # before the digest; safe() never keeps it
MAX_STUDY = 100  # characters of a study's name (results/<study>/, logs/<study>/)

_WORD = r"[a-z]+(?:-[a-z]+)*"  # a registry name: letters and inner hyphens, no digits (ring, erdos-renyi)
_ARG = r"[0-9][0-9.e+-]*"  # the argument after a spec's colon: a number (0.01, 8, 1e-3)
_TOKEN = r"[A-Za-z0-9.+-]+"  # a value safe() keeps as it is, with no _ or = to blur where it ends
_SPEC = re.compile(rf"({_WORD})(?::({_ARG}))?((?:,[a-z]+={_TOKEN})*)")  # top:0.01, rand:0.1,unbiased=true
_SPELT_SPEC = re.compile(rf"{_WORD}{_ARG}")  # what WORD:ARG is spelt as: a plain value so spelt is ambiguous
_ALGORITHM = re.compile(r"[a-z0-9]+")  # no hyphen: the first one ends the algorithm
_KEY = re.compile(r"[a-z][a-z0-9_]*")
_NODES = re.compile(r"[1-9][0-9]*")
_AXES = ("algorithm", "compressor", "topology", "nodes")


def safe(text: Any) -> str:
    """A file-name-safe form of a spec: top:0.01 -> top0.01, rand:0.01,unbiased=true -> rand0.01_unbiased=true."""
    return re.sub(r"[^A-Za-z0-9.=_+-]", "", str(text).replace(",", "_"))


def spelling(settings: dict[str, Any]) -> str:
    """A cell's settings spelt out: algorithm-compressor_topology<nodes>, then key=value of the other settings."""
    extras = "_".join(f"{safe(k)}={safe(v)}" for k, v in sorted(settings.items(), key=lambda kv: str(kv[0]))
                      if k not in _AXES)
    topology = f"{safe(settings['topology'])}{safe(settings['nodes'])}"
    cell = f"{safe(settings['algorithm'])}-{safe(settings['compressor'])}_{topology}"
    return f"{cell}_{extras}" if extras else cell


def digest(value: Any) -> str:
    """A stable digest of plain data (dict keys sorted)."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except TypeError:  # keys of mixed types cannot be sorted
        text = repr(value)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST]


def bounded(name: str, value: Any, keep: bool = True) -> str:
    """``name`` when ``keep`` and it fits MAX_NAME bytes, else its start + ~ + the digest of ``value``."""
    if keep and len(name.encode()) <= MAX_NAME:
        return name
    return name.encode()[: MAX_NAME - len(MARK) - DIGEST].decode(errors="ignore") + MARK + digest(value)


def cell_name(settings: dict[str, Any]) -> str:
    """The name of the cell of ``settings`` (its algorithm, compressor, topology, nodes and other settings)."""
    return bounded(spelling(settings), settings, keep=reads_back(settings))


def trial_name(point: dict[str, Any], seed: Any) -> str:
    """A tuning trial's name: key=value of its grid point (the schema's numbers), then _s<seed>."""
    name = "_".join(f"{k}={safe(v)}" for k, v in point.items()) or "default"
    return bounded(f"{name}_s{seed}", {"point": point, "seed": seed})


# -- which spellings read back ------------------------------------------------------------------------------
def reads_back(settings: dict[str, Any]) -> bool:
    """Whether the spelling of ``settings`` gives them back: the algorithm has no hyphen, the compressor is
    NAME[:NUMBER][,key=value...], the topology and nodes read back (``_topology_reads_back``), and every other
    key=value is a plain token or NAME:NUMBER. Two valid cells whose spellings read back and are equal have
    equal settings; the study checks its cells' names for repeats all the same."""
    if not _ALGORITHM.fullmatch(str(settings["algorithm"])) or not _SPEC.fullmatch(str(settings["compressor"])):
        return False
    if isinstance(settings["nodes"], bool) or not _topology_reads_back(str(settings["topology"]),
                                                                        str(settings["nodes"])):
        return False
    return all(_KEY.fullmatch(str(k)) and _plain_value(v) for k, v in settings.items() if k not in _AXES)


def _topology_reads_back(topology: str, nodes: str) -> bool:
    """Whether NAME<nodes>, NAME<number><nodes> or file<path><nodes> reads back as ``topology`` at ``nodes``.
    A topology either takes an argument or takes none (bench/topology/graphs.py), so NAME tells which form:
    a NAME alone is followed by the nodes; a number splits from the nodes where it is shortest and ends in a
    digit (erdos-renyi0.516 is erdos-renyi:0.5 at n = 16, so erdos-renyi:0.51 at n = 6 gets a digest); a file
    name is kept when it ends in a non-digit (fileedges.txt16)."""
    if not _NODES.fullmatch(nodes):
        return False
    spec = re.fullmatch(rf"({_WORD})(?::({_ARG}))?", topology)
    if spec is not None and spec.group(2) is None:
        return True
    if spec is not None:
        rest = spec.group(2) + nodes
        for i in range(1, len(rest)):
            if re.fullmatch(_ARG, rest[:i]) and rest[i - 1].isdigit() and _NODES.fullmatch(rest[i:]):
                return rest[:i] == spec.group(2)
        return False
    return re.fullmatch(r"file:[A-Za-z0-9.+-]*[A-Za-z.+-]", topology) is not None


def _plain_value(value: Any) -> bool:
    if isinstance(value, (dict, list, tuple)):
        return False
    text = str(value)
    if ":" in text:
        return re.fullmatch(rf"{_WORD}:{_ARG}", text) is not None
    return re.fullmatch(_TOKEN, text) is not None and _SPELT_SPEC.fullmatch(text) is None


def keyed(specs: list[Any], what: str) -> dict[str, Any]:
    """name -> spec of a list of specs (the consensus study's methods), each name safe() when that reads back,
    else with a digest; one line when two specs get one name."""
    out: dict[str, Any] = {}
    for spec in specs:
        plain = _SPEC.fullmatch(str(spec)) is not None
        name = bounded(safe(spec), spec, keep=plain and bool(safe(spec)))
        if name in out and out[name] != spec:
            raise collision(what, name, repr(out[name]), repr(spec))
        out[name] = spec
    return out


def collision(what: str, name: str, first: str, second: str) -> BenchError:
    """The one line refusing two things that would share a folder."""
    return BenchError(f"{what}: {first} and {second} would share the folder name {name!r}; give them "
                      "settings that differ in more than punctuation")
