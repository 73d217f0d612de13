"""A run directory's life before training: lock it, refuse (or set aside) what another run left
there, recognise a finished run, then start the runner's loop in this process or in one process per
worker group (``--backend dist``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from ..errors import BenchError
from ..files import remove_temporaries
from .config import RunConfig
from .outputs import LOCK, read_json, run_directory_lock
from .runner import FINAL, OUT_OF_SPACE, Loop
from .setup import build, device_of


def _set_aside(out: Path, previous: dict) -> Path:
    """Move the files of a run of other settings to ``.stale/`` beside ``out`` (kept, never deleted);
    ``out`` itself, with its lock, stays."""
    from .dist import under_launcher

    if under_launcher():  # every rank would race to move it
        raise BenchError(f"{out} holds a run with other settings and --replace-stale cannot move it under "
                         "torchrun; move it yourself or use another --out")
    base = out.parent / ".stale" / f"{out.name}-{previous.get('fingerprint') or 'unknown'}"
    target, k = base, 1
    while target.exists():
        target, k = base.with_name(f"{base.name}.{k}"), k + 1
    target.mkdir(parents=True)
    for entry in out.iterdir():
        if entry.name != LOCK:
            os.replace(entry, target / entry.name)
    print(f"{out}: held run {previous.get('run_id')!r} of other settings; moved to {target}", file=sys.stderr)
    return target


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


def run(cfg: RunConfig, out: Path, argv: list[str] | None = None, replace_stale: bool = False) -> int:
    """Train (or resume, or recognise as done) one run in ``out``; returns the exit status. A run of
    other settings already in ``out`` is refused, or with ``replace_stale`` set aside to ``.stale/``.
    One process writes ``out`` at a time; a second one is refused."""
    out = Path(out)
    if not _takes_lock(cfg):
        return _run(cfg, out, argv, replace_stale)
    with run_directory_lock(out):
        remove_temporaries(out)  # of writers killed mid-write; no one else writes here now
        return _run(cfg, out, argv, replace_stale)


def _run(cfg: RunConfig, out: Path, argv: list[str] | None, replace_stale: bool) -> int:
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
            raise BenchError(f"{out} holds run {previous.get('run_id')!r} with other settings; use another --out")
        _set_aside(out, previous)
        previous = None
    if previous is not None and previous.get("status") in FINAL and (out / "metrics.parquet").exists():
        if not cfg.quiet and os.environ.get("RANK", "0") == "0":
            print(f"{out}: already {previous['status']}, nothing to do", file=sys.stderr)
        return 0
    device = device_of(cfg.device)
    if cfg.backend != "dist":
        return _train(cfg, out, device, previous)
    from .dist import CHILD_FLAG, init_group, spawn, under_launcher

    if not under_launcher():
        if argv is None:
            raise BenchError("backend=dist outside torchrun needs the command line to re-launch")
        procs = cfg.procs or cfg.nodes
        if cfg.nodes % procs:
            raise BenchError(f"nodes={cfg.nodes} must be a multiple of procs={procs}")
        outcome = spawn(argv, procs)
        if outcome.failure is not None and outcome < 128:
            _record_launch_failure(out, outcome.failure)
        return int(outcome)
    import torch.distributed as dist

    created = not dist.is_initialized()  # a caller that made the group (several runs in one launch) keeps it
    rank, world = init_group(device, cfg.dist_timeout)
    if os.environ.get(CHILD_FLAG) is None and cfg.procs and cfg.procs != world:
        raise BenchError(f"procs={cfg.procs} but torchrun started {world} processes")
    try:
        return _train(cfg, out, device, previous, rank, world)
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


def _train(cfg: RunConfig, out: Path, device: torch.device, previous: dict | None, rank: int = 0,
           world: int = 1) -> int:
    try:
        loop = Loop(cfg, out, build(cfg, device, rank, world), device, previous)
    except OSError as err:
        if err.errno not in OUT_OF_SPACE:
            raise  # a path the system refused (permissions...): the command line's bad input
        print(f"bench: error: {out}: cannot start the run: {err}", file=sys.stderr)  # nothing to mark yet
        return 1
    return loop.run()
