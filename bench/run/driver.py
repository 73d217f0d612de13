"""Which pipeline driver (the Snakemake process of a study) a run was started by, and whether it still runs.

A driver killed outright (SIGKILL, a closed terminal's process group spared) leaves its jobs training on with
no one to collect them, while the same command started again would train those runs a second time beside
them. The driver names itself in the environment its jobs inherit (``CHOCO_DRIVER``: its pid and its start
time, so a reused pid is not taken for it); a run that finds it gone stops as on SIGTERM: a checkpoint, status
interrupted, and the next driver's job resumes it."""
from __future__ import annotations

import os
import time

ENV = "CHOCO_DRIVER"
CHECK_EVERY_S = 1.0


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks after boot, /proc/PID/stat's 22nd field); None when there
    is no such process (or no /proc)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    return fields[19].decode() if len(fields) > 19 else None


def identity(pid: int | None = None) -> str:
    """What a driver writes into ``CHOCO_DRIVER``: ``PID:START``."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{process_start(pid)}"


class DriverWatch:
    """``gone()``: whether the driver named in the environment has ended (looked at most once a second; False
    for a run no driver started, or where processes cannot be looked at)."""

    def __init__(self, environ=os.environ):
        pid, _, start = (environ.get(ENV) or "").partition(":")
        self.pid, self.start = (int(pid), start) if pid.isdigit() and start not in ("", "None") else (None, None)
        self.next_check = 0.0

    def gone(self) -> bool:
        if self.pid is None or time.monotonic() < self.next_check:
            return False
        self.next_check = time.monotonic() + CHECK_EVERY_S
        return process_start(self.pid) != self.start
