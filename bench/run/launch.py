"""A run directory's life before training, behind the one way into a run (``bench.run.start``): lock it,
refuse (or set aside) what another run left there, recognise a finished run, then start the runner's loop in
this process or in one process per worker group (``--backend dist``)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from ..data.base import notes as data_notes
from ..errors import BenchError
from ..files import remove_temporaries
from . import failure
from .config import RunConfig
from .outputs import LOCK, read_json, run_directory_lock
from .identity import finished
from .runner import OUT_OF_SPACE, Loop
from .resolved import Resolved, available, resolve_run
from .setup import build
from .threads import settle as settle_threads


def _stale_dir(out: Path, previous: dict) -> Path:
    """Where --replace-stale moves the files of a run of other settings found in ``out``."""
    return out.parent / ".stale" / f"{out.name}-{previous.get('fingerprint') or 'unknown'}"


def _set_aside(out: Path, previous: dict) -> Path:
    """Move the files of a run of other settings to ``.stale/`` beside ``out`` (kept, never deleted);
    ``out`` itself, with its lock, stays."""
    from .dist import under_launcher

    if under_launcher():  # every rank would race to move it
        raise BenchError(f"{out} holds a run with other settings and --replace-stale cannot move it under "
                         "torchrun; move it yourself or use another --out")
    base = _stale_dir(out, previous)
    target, k = base, 1
    while target.exists():
        target, k = base.with_name(f"{base.name}.{k}"), k + 1
    target.mkdir(parents=True)
    for entry in out.iterdir():
        if entry.name != LOCK:
            os.replace(entry, target / entry.name)
    print(f"{out}: held run {previous.get('run_id')!r} of other settings; moved to {target}", file=sys.stderr)
    return target


def _shown(value) -> str:
    """A setting's value as ``--set`` takes it."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _differences(previous: dict, cfg: RunConfig, most: int = 5) -> str:
    """What sets the run recorded in ``previous`` (a run.json) apart from ``cfg``: ``key: old -> new``
    for up to ``most`` settings (task_options.KEY for the task's own), else the other inputs of a run's
    identity (a graph file's edges, the method's revision)."""
    from ..algorithms import ALGORITHMS
    from .config import _LATER_KEYS

    old = previous.get("config") if isinstance(previous.get("config"), dict) else {}
    new = cfg.to_dict()

    def flat(config: dict) -> dict:
        out = {}
        for key, value in config.items():
            if key in ("quiet", "stop_at"):  # not part of what a run is
                continue
            if key in ("task_options", "algorithm_options") and isinstance(value, dict):
                out.update({f"{key}.{k}": v for k, v in value.items()})
            else:
                out[key] = value
        return out

    before, after = flat({**_LATER_KEYS, **old}), flat(new)
    keys = [k for k in after if before.get(k, _MISSING) != after[k]]
    keys += [k for k in before if k not in after]
    changes = [f"{k}: {_shown(before.get(k)) if k in before else '(unset)'} -> "
               f"{_shown(after[k]) if k in after else '(unset)'}" for k in keys]
    if not changes:
        topology = previous.get("topology")
        digest = topology.get("digest") if isinstance(topology, dict) else None
        if digest != cfg.graph_digest:
            changes.append(f"edges of {cfg.topology}: {digest} -> {cfg.graph_digest}")
        elif cfg.algorithm in ALGORITHMS and ALGORITHMS.get(cfg.algorithm).revision:
            changes.append(f"{cfg.algorithm}'s update revised (revision {ALGORITHMS.get(cfg.algorithm).revision})")
        else:
            changes.append(f"fingerprint {previous.get('fingerprint')} -> {cfg.fingerprint()}")
    more = f", and {len(changes) - most} more" if len(changes) > most else ""
    return ", ".join(changes[:most]) + more


_MISSING = object()


def _unrecorded(out: Path) -> list[str]:
    """Results in ``out`` that no readable run.json describes (another run's, or run.json was lost)."""
    return sorted(p.name for p in out.glob("*") if p.name == "metrics.parquet" or p.match("checkpoint*.pt"))


def _takes_lock(cfg: RunConfig) -> bool:
    """Whether this process holds the run directory: a simulation, the launcher of dist ranks (which then
    write under its lock), or rank 0 of a launch made by torchrun."""
    from .dist import CHILD_FLAG, under_launcher

    if cfg.backend != "dist" or not under_launcher():
        return True
    return os.environ.get(CHILD_FLAG) is None and os.environ.get("RANK") == "0"


def run(cfg: RunConfig, out: str | Path, replace_stale: bool = False, resolved: Resolved | None = None) -> int:
    """``start`` of a config, with its parts when they were resolved already (else resolved here, once for this
    process: a rank rebuilds them from the settings). One process writes ``out`` at a time; a second one is
    refused."""
    out = Path(out)
    resolved = resolved if resolved is not None else resolve_run(cfg)  # before anything is written
    if not _takes_lock(cfg):
        return _run(resolved, out, replace_stale)
    with run_directory_lock(out):
        remove_temporaries(out)  # of writers killed mid-write; no one else writes here now
        return _run(resolved, out, replace_stale)


def _run(resolved: Resolved, out: Path, replace_stale: bool) -> int:
    cfg = resolved.cfg
    previous = read_json(out / "run.json")
    if not isinstance(previous, dict):
        previous = None
        unrecorded = _unrecorded(out) if out.is_dir() else []
        if unrecorded:
            state = "unreadable" if (out / "run.json").exists() else "missing"
            if not replace_stale:
                raise BenchError(f"{out / 'run.json'} is {state} but {out} holds {', '.join(unrecorded)} of a run; "
                                 "move them away, use another --out, or --replace-stale to set them aside")
            _set_aside(out, {})
    if previous is not None and previous.get("fingerprint") != cfg.fingerprint():
        if not replace_stale:
            raise BenchError(f"{out} holds run {previous.get('run_id')!r} with other settings "
                             f"({_differences(previous, cfg)}); use another --out, or --replace-stale to move "
                             f"that run's files to {_stale_dir(out, previous)} (kept) and start this one there")
        _set_aside(out, previous)
        previous = None
    if finished(previous, out):
        if not cfg.quiet and os.environ.get("RANK", "0") == "0":
            print(f"{out}: already {previous['status']}, nothing to do", file=sys.stderr)
        return 0
    device = available(resolved.device)
    if cfg.backend != "dist":
        return _train(resolved, out, previous)
    from .dist import CHILD_FLAG, init_group, spawn, under_launcher

    if not under_launcher():
        procs = cfg.procs or cfg.nodes
        if cfg.nodes % procs:
            raise BenchError(f"nodes={cfg.nodes} must be a multiple of procs={procs}")
        outcome = spawn(cfg, out, procs)
        if outcome.failure is not None and outcome < 128:
            _record_launch_failure(out, outcome.failure)
        return int(outcome)
    import torch.distributed as dist

    created = not dist.is_initialized()  # a caller that made the group (several runs in one launch) keeps it
    rank, world = init_group(device, cfg.dist_timeout)
    if os.environ.get(CHILD_FLAG) is None and cfg.procs and cfg.procs != world:
        raise BenchError(f"procs={cfg.procs} but torchrun started {world} processes")
    try:
        return _train(resolved, out, previous, rank, world)
    finally:
        if created and dist.is_initialized():
            dist.destroy_process_group()


def _record_launch_failure(out: Path, failure: str) -> None:
    """After the ranks of a launch: a run.json that still says running (rank 0 itself was killed or
    hung, so nobody wrote the end) is marked failed with what happened; one line either way."""
    from .outputs import now, write_json

    record = read_json(out / "run.json")
    if isinstance(record, dict) and record.get("status") == "running":
        write_json(out / "run.json", {**record, "status": "failed", "error": f"launcher: {failure}",
                                      "end_time": now()})
    print(f"bench: error: {out}: {failure}; the same command resumes from the last checkpoint", file=sys.stderr)


def _train(resolved: Resolved, out: Path, previous: dict | None, rank: int = 0, world: int = 1) -> int:
    cfg, device = resolved.cfg, resolved.device
    try:
        with data_notes(not cfg.quiet and rank == 0):  # preparing data says what it does (a log is read live)
            parts = build(resolved, rank, world)
        threads = settle_threads(parts.task.largest_tensor())
        loop = Loop(cfg, out, parts, device, previous, threads=threads)
    except OSError as err:
        if err.errno not in OUT_OF_SPACE:
            raise  # a path the system refused (permissions...): the command line's bad input
        print(f"bench: error: {out}: cannot start the run: {err}", file=sys.stderr)  # nothing to mark yet
        return 1
    except Exception as err:  # a run.json left saying running is marked failed (failure.py)
        return failure.not_started(out, err, writer=rank == 0)
    return loop.run()


def run_rank(settings_path: str, out: str) -> int:
    """One rank of a launch bench made itself: its settings from the file the launcher wrote (checked as
    they load), bad input one line and status 2, as `bench run` gives it."""
    from .settings_file import load_settings

    try:
        return run(load_settings(settings_path), out)
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a path the system refused, as `bench run` says it
        if err.filename is None:
            raise
        print(f"bench: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2
