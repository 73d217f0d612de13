"""A run's identity: the fingerprint of everything that changes its numbers, and the run id (its directory
name) built on it. Run ids name directories that hold hours of training, so this form is kept: a run that
was written before a setting existed, or before a knob moved into the algorithm's options, keeps its id
(tests/test_run_config_types.py pins them literally); and whether a run in a folder is done (``finished``)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..algorithms import ALGORITHMS, shortcuts
from ..comm import netmodel
from ..compressors import spec as compressors
from ..data import partition
from ..specs import parse_spec
from ..topology import kinds
from ..topology.kinds import TOPOLOGIES

if TYPE_CHECKING:
    from .config import RunConfig

FINAL = ("completed", "diverged")  # a run whose run.json says one of these is done; "paused" (stop_at) is continued


def finished(record, out) -> bool:
    """Whether the run ``record`` (its run.json as read, or None) describes in folder ``out`` is done: a final
    status and its metrics written. A paused or interrupted run is continued, and so is one whose metrics are lost."""
    return isinstance(record, dict) and record.get("status") in FINAL and (Path(out) / "metrics.parquet").exists()

# settings added after runs were first written, and the value that reproduces those runs
LATER_KEYS = {"val_fraction": 0.0, "recipe": "none", "algorithm_options": {}, "faults": {}}
# the knobs that were run settings when run ids were first taken: at the top level of the fingerprint with their
# defaults, for every run; a word given to a knob later (a tunable step such as copy_step) stays in its options
TOP_LEVEL_KNOBS = ("gamma", "gamma_tune_steps", "order")
UNTIMED = ("quiet", "stop_at")  # how far to train now, and how loudly, is not what the run is


def canonical(cfg: "RunConfig") -> "RunConfig":
    """``cfg`` with each of its specs in its one spelling, taken once where a run is resolved (config.resolve), so
    that one training has one fingerprint, run id, cell name and run.json however it was spelt (top:0.10 and
    top:1e-1 are top:0.1); the spellings already canonical are those run ids were first taken with."""
    return dataclasses.replace(cfg, compressor=canonical_compressor(cfg.compressor, cfg.algorithm),
                               topology=kinds.canonical(cfg.topology), data=partition.canonical(cfg.data),
                               network=netmodel.canonical(cfg.network))


def canonical_compressor(compressor: str, algorithm: str) -> str:
    """``compressor``'s one spelling under ``algorithm`` (whose need of a contraction settles QSGD's form)."""
    contraction = ALGORITHMS.get(algorithm).contraction if algorithm in ALGORITHMS else False
    return compressors.canonical(compressor, contraction=contraction)


def identity_dict(cfg: "RunConfig") -> dict[str, Any]:
    """The settings as run ids were first taken: the knobs that were once run settings (TOP_LEVEL_KNOBS) at the
    top level with their defaults, as when they were settings of the run."""
    d = cfg.to_dict()
    options = dict(d["algorithm_options"])
    named = shortcuts()
    for name in TOP_LEVEL_KNOBS:
        d[name] = options.pop(name, named[name].default)
    d["algorithm_options"] = options
    for key in UNTIMED:
        d.pop(key)
    for key, default in LATER_KEYS.items():  # runs made before a key existed keep their id
        if d.get(key) == default:
            d.pop(key)
    if cfg.graph_digest is not None:  # file:PATH names a place; the run is on the edges it held
        d["graph_digest"] = cfg.graph_digest
    spec = parse_spec(cfg.topology)
    kind = TOPOLOGIES.get(spec.name) if spec.name in TOPOLOGIES else None
    revision = kind.revision(spec, cfg.nodes) if kind is not None and kind.revision else 0
    if revision:  # the graph's matrices changed since earlier runs on it
        d["topology_revision"] = revision
    if isinstance(cfg.faults, dict) and cfg.faults.get("pairwise") is True:  # Boyd's exact average since 2026-12-07
        d["pairwise_revision"] = 1
    if cfg.algorithm in ALGORITHMS:  # its revisions (Method.revision, auto_revision): earlier runs are not this one
        d.update(ALGORITHMS.get(cfg.algorithm).identity(cfg.algorithm_options, cfg.compressor))
    return d


def fingerprint(cfg: "RunConfig") -> str:
    """Hash of everything that changes the numbers (not quiet/device/paths of output)."""
    return hashlib.sha256(json.dumps(identity_dict(cfg), sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_id(cfg: "RunConfig") -> str:
    return (f"{cfg.task}_{cfg.algorithm}_{cfg.compressor}_{cfg.topology}{cfg.nodes}_s{cfg.seed}"
            .replace(":", "").replace(",", "-").replace("/", "-") + f"_{fingerprint(cfg)}")
