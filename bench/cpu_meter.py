"""How much of the machine other processes took while a measurement ran (`bench track`, a run with measured
compute, `bench plan`).

The 1-minute load average says little about a 20-second `bench perf`: it moves about a third of the way
towards the true load in 20 s, and it counts the benchmark's own threads. What a timing needs to know is
whether the benchmark got the processors, so the meter reads the CPU time the whole machine spent busy
(Linux's /proc/stat: user, nice, system, irq, softirq and steal, the last being time a hypervisor gave to
other guests) over the measured span, takes away the CPU time of this process and of the children it
waited for (os.times: the benchmark's process), and divides the rest by wall time x cores:

    others_cpu_share = (machine busy - own busy) / (wall x cores)

0 on a quiet machine; 0.5 on 2 cores with one other process spinning. Where /proc/stat is missing (macOS)
the meter says ``"method": "unavailable"`` and readers fall back to the load average."""
from __future__ import annotations

import os
import time
from typing import Callable

PROC_STAT = "/proc/stat"
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system [idle iowait] irq softirq steal (guest is inside user)


def machine_busy_seconds(text: str, ticks_per_second: float) -> float:
    """CPU seconds every core of the machine spent busy since boot, from the aggregate ``cpu`` line of
    /proc/stat's text."""
    for line in text.splitlines():
        words = line.split()
        if words and words[0] == "cpu":
            counts = [int(w) for w in words[1:]]
            return sum(counts[i] for i in _BUSY_FIELDS if i < len(counts)) / ticks_per_second
    raise ValueError("no aggregate cpu line")


def stat_cores(text: str) -> int:
    """How many processors /proc/stat describes (its cpuN lines): in a container, the host's, whose busy time
    the aggregate line sums."""
    return sum(1 for line in text.splitlines() if line.startswith("cpu") and line[3:4].isdigit())


def _read_stat() -> str:
    with open(PROC_STAT) as handle:
        return handle.read()


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuMeter:
    """``with CpuMeter() as meter: ...`` then ``meter.result``: the others' share of the machine's CPU over
    the block (module docstring). The readers are parameters so that the arithmetic can be tested."""

    def __init__(self, read_stat: Callable[[], str] = _read_stat, own_seconds: Callable[[], float] = _own_seconds,
                 clock: Callable[[], float] = time.monotonic, cores: int | None = None,
                 ticks_per_second: float | None = None):
        self._read, self._own, self._clock = read_stat, own_seconds, clock
        self.cores = cores  # None: the processors /proc/stat describes
        self.ticks = ticks_per_second or (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
        self.result: dict = {"method": "unavailable"}
        self._start = None

    def _sample(self):
        text = self._read()
        if self.cores is None:
            self.cores = stat_cores(text) or os.cpu_count() or 1
        return machine_busy_seconds(text, self.ticks), self._own(), self._clock()

    def __enter__(self) -> "CpuMeter":
        try:
            self._start = self._sample()
        except (OSError, ValueError):
            self._start = None
        return self

    def __exit__(self, *exc) -> None:
        if self._start is None:
            return
        try:
            busy1, own1, t1 = self._sample()
        except (OSError, ValueError):
            return
        busy0, own0, t0 = self._start
        wall = t1 - t0
        if wall <= 0:
            return
        others = max(0.0, (busy1 - busy0) - (own1 - own0))
        # /proc/stat counts in ticks (10 ms): over a span of a few ms one tick can land inside it, and the share
        # would read above 1, more than every core. No process can take more than the machine: the share is
        # capped at 1, and a span shorter than a tick says little either way (its wall_s says so).
        self.result = {"method": "proc-stat", "others_cpu_share": round(min(1.0, others / (wall * self.cores)), 3),
                       "machine_busy_s": round(busy1 - busy0, 2), "own_cpu_s": round(own1 - own0, 2),
                       "wall_s": round(wall, 2), "cores": self.cores}
