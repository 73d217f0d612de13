"""One training run: resolved config, runner loop, run directory (Contract 2).

``start(settings, out)`` is the one way into a run, from `bench run`, the pipeline's tuning and the
benchmarks alike. ``RunConfig`` and ``resolve`` read and range-check the settings; ``resolve_run``
(bench/run/resolved.py) parses them into a run's parts and checks them against each other (the pipeline builds
its DAG with it); ``start`` (and ``run``, its form for a resolved config, bench/run/launch.py) imports the rest
of the training code."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from .config import RunConfig, resolve

__all__ = ["RunConfig", "resolve", "start", "run"]


def start(settings: RunConfig | Mapping[str, Any], out: str | Path, *, replace_stale: bool = False,
          argv: list[str] | None = None) -> int:
    """Train (or resume, or recognise as done) the run of ``settings`` in ``out``; returns the exit status
    `bench run` exits with (0 for a run that completed, diverged or paused; 128 + N after signal N).
    ``settings``: a resolved ``RunConfig``, or a mapping of setting names to values resolved here (bench's
    defaults beneath them); a bad one raises BenchError (one line) before anything is written. A run of
    other settings already in ``out`` is refused, or with ``replace_stale`` set aside to ``.stale/``.
    ``argv``, the command line a run came from, is not needed: `--backend dist` ranks read the settings
    from a file (bench/run/dist.py), so a run started from Python launches them the same way."""
    from .resolved import resolve_run
    from .settings_file import config_of

    cfg = settings if isinstance(settings, RunConfig) else config_of(settings)
    resolved = resolve_run(cfg)  # its parts, every combination checked: before anything is written or launched
    from .launch import run

    return run(cfg, out, replace_stale=replace_stale, resolved=resolved)


def __getattr__(name: str):
    if name == "run":
        from . import launch

        return launch.run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
