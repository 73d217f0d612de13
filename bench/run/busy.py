"""How busy the machine was while a run measured its compute time: run.json's ``timing``.

A measured ``time_compute_s`` is the time the gradients took, and it is only as good as the processors the run got:
a default `bench run` of the MNIST-1D MLP at n = 8 measured 0.05 s of compute on a quiet 2-core machine and about
1 s beside one other job, and nothing in its record said so (issue 57). The meter (bench/cpu_meter.py) reads what
other processes took of the machine's CPU over the run's training, its measured steps and the evaluations between
them (one read of /proc/stat at each checkpoint, not two at every step of a few milliseconds, where its 10 ms ticks
say nothing). The share is an outcome, like ``wall_s``: no setting, no part of the run id or fingerprint.

The checkpoint carries the sums (Counters.others_cpu_s, metered_core_s), so a resumed run's share covers every
session. Under ``--backend dist`` the ranks are processes of the run, not others: their CPU (the ranks on rank 0's
machine, GROUP_RANK 0 under torchrun) is taken away from rank 0's reading, in one collective where the ranks
already meet (a checkpoint)."""
from __future__ import annotations

import os

import torch

from ..cpu_meter import CpuMeter


class BusyMeter:
    """Started after the untimed warm-up; ``fold`` adds the span since the last fold to the run's counters (every
    process at the same points: a checkpoint, the end), ``timing`` is run.json's entry."""

    def __init__(self, cfg, comm, counters, device: torch.device, dist: bool):
        self.comm, self.counters, self.device, self.dist = comm, counters, device, dist
        self.measured = cfg.compute_time == "measured"
        self.meter = self._started()

    def _started(self) -> CpuMeter | None:
        return CpuMeter().__enter__() if self.measured else None  # a modelled compute time reads no clock

    def fold(self, rows: int) -> None:
        """The span since the last fold into the counters; ``rows``: this process's workers (for the collective)."""
        if self.meter is None:
            return
        self.meter.__exit__(None, None, None)
        got = self.meter.result
        own = got.get("own_cpu_s", 0.0)
        if self.dist:  # every rank's CPU on rank 0's machine, summed (global_mean is over the n workers' rows)
            here = own if os.environ.get("GROUP_RANK", "0") == "0" else 0.0
            part = torch.full((rows, 1), here / rows, dtype=torch.float64, device=self.device)
            own = float(self.comm.global_mean(part)) * self.comm.n
        if got["method"] == "proc-stat":  # rank 0's reading is the one recorded (it is the machine run.json names)
            c = self.counters
            c.others_cpu_s += max(0.0, got["machine_busy_s"] - own)
            c.metered_core_s += got["wall_s"] * got["cores"]
            c.metered_cores = got["cores"]
        self.meter = self._started()

    def timing(self) -> dict:
        """``{"compute": "modelled"}``, or the measured compute's ``others_cpu_share`` (0: the run had the machine
        to itself; 0.5: on 2 cores, one other process spinning), the cores and the seconds it was read over; None
        with ``"method": "unavailable"`` where the machine cannot say (no /proc/stat)."""
        if not self.measured:
            return {"compute": "modelled"}
        c = self.counters
        if c.metered_core_s <= 0:
            return {"compute": "measured", "others_cpu_share": None, "method": "unavailable"}
        return {"compute": "measured", "others_cpu_share": round(min(1.0, c.others_cpu_s / c.metered_core_s), 3),
                "cores": c.metered_cores, "metered_s": round(c.metered_core_s / c.metered_cores, 2),
                "method": "proc-stat"}
