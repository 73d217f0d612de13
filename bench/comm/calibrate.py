"""Ping-pong calibration of the α–β model on the running backend (ranks 0 and 1).

α is half the round-trip time of a tiny message; β's bandwidth comes from the extra half
round trip of a large one. Every rank calls it (the others wait at a barrier).
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .netmodel import NetworkModel


def _round_trip(nbytes: int, reps: int, device: torch.device) -> float:
    buffer = torch.zeros(max(nbytes, 1), dtype=torch.uint8, device=device)
    rank = dist.get_rank()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        if rank == 0:
            dist.send(buffer, dst=1)
            dist.recv(buffer, src=1)
        else:
            dist.recv(buffer, src=0)
            dist.send(buffer, dst=0)
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]  # the median resists the first, slower connection set-up


def pingpong(device: torch.device, small: int = 8, large: int = 1 << 20, reps: int = 20) -> NetworkModel | None:
    """A NetworkModel fitted to this backend, on every rank (None with a single process)."""
    if dist.get_world_size() < 2:
        return None
    result = torch.zeros(2, dtype=torch.float64)
    if dist.get_rank() in (0, 1):
        t_small = _round_trip(small, reps, device)
        t_large = _round_trip(large, max(3, reps // 4), device)
        alpha = t_small / 2
        extra = max(t_large / 2 - alpha, 1e-9)
        result = torch.tensor([alpha, large * 8 / extra], dtype=torch.float64)
    dist.broadcast(result, src=0)
    return NetworkModel("calibrated", latency_s=float(result[0]), bandwidth_bps=float(result[1]))
