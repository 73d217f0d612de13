"""Which pipeline driver (the Snakemake process of a study) a run was started by, and whether it still runs.

A driver killed outright (SIGKILL, a closed terminal's process group spared) leaves its jobs training on with
no one to collect them, while the same command started again would train those runs a second time beside
them. The driver names itself in the environment its jobs inherit (``CHOCO_DRIVER``: its pid and start time, so a
reused pid is not taken for it, and the machine's boot and the pid namespace it counts in); a run that finds it
gone stops as on SIGTERM: a checkpoint, status interrupted, and the next driver's job resumes it. A job that
runs where the driver's pid means nothing (another node of a cluster, a container with its own pids) does not
watch it."""
from __future__ import annotations

import os
import time
from pathlib import Path

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


def _where() -> str:
    """This machine's boot and this process's pid namespace: where a pid names the same process."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return "?"


def identity(pid: int | None = None) -> str:
    """What a driver writes into ``CHOCO_DRIVER``: ``PID:START:WHERE``."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{process_start(pid)}:{_where()}"


class DriverWatch:
    """``gone()``: whether the driver named in the environment has ended (looked at most once a second; False
    for a run no driver started, or one where the driver's pid names no process of its machine and namespace)."""

    def __init__(self, environ=os.environ):
        pid, start, where = ((environ.get(ENV) or "").split(":", 2) + ["", ""])[:3]
        here = _where()
        known = pid.isdigit() and start not in ("", "None") and where == here and here != "?"
        self.pid, self.start = (int(pid), start) if known else (None, None)
        self.next_check = 0.0

    def gone(self) -> bool:
        if self.pid is None or time.monotonic() < self.next_check:
            return False
        self.next_check = time.monotonic() + CHECK_EVERY_S
        return process_start(self.pid) != self.start
