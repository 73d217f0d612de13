"""One pipeline driver per working folder, and what a killed one left behind (read by the Snakefile, which
Snakemake reads before it locks the folder).

The driver holds an OS lock, ``.snakemake/choco-driver.lock``, for its whole life; the kernel releases it when
the driver ends, however it ends. A driver that takes it knows no other driver of this folder runs, so the
locks Snakemake keeps under ``.snakemake/locks/`` are a killed driver's: they are removed (what `snakemake
--unlock` does by hand), and `make reproduce` carries on. A driver that finds the lock held leaves everything
as it is, and Snakemake says the folder is locked. The driver's identity goes into its jobs' shells (never into
its own environment), and they stop when it is gone (bench/run/driver.py)."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..files import open_lock
from ..run.driver import ENV, identity

LOCK = "choco-driver.lock"
_held: dict[str, int] = {}  # folder -> the descriptor holding its lock, kept open for this process's life


def claim(workdir: Path) -> tuple[str, list[str]]:
    """Take the driver lock of ``workdir``: (the shell words that name this driver to its jobs, the names of the
    locks a killed driver left, now removed). When another live driver holds it: ("", [])."""
    folder = (Path(workdir) / ".snakemake").resolve()
    if str(folder) not in _held:
        folder.mkdir(parents=True, exist_ok=True)
        fd = open_lock(folder / LOCK)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return "", []
        _held[str(folder)] = fd
    stale = sorted((folder / "locks").glob("*.lock")) if (folder / "locks").is_dir() else []
    for path in stale:
        path.unlink(missing_ok=True)
    return f"export {ENV}={identity()}; ", [path.name for path in stale]
