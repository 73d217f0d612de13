"""Repeated timing with min / median / max, and the JSON figure format `analysis regress` compares."""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def repeat(fn: Callable[[], None], repeats: int, device: torch.device, warmup: int = 1) -> list[float]:
    """Seconds per call of ``fn`` over ``repeats`` timed calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return times


def figure(values: list[float], unit: str, higher_is_better: bool, kind: str, **extra) -> dict:
    """One benchmark figure: its spread over repeats, unit, direction and kind (ratio or absolute)."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "repeats": len(values),
            "values": list(values), "unit": unit, "higher_is_better": higher_is_better, "kind": kind, **extra}


def ratio_figure(numerators: list[float], denominators: list[float], unit: str, higher_is_better: bool,
                 **extra) -> dict:
    """A ratio from paired repeats (each repeat's own ratio), robust to slow drifts of the machine."""
    return figure([a / b for a, b in zip(numerators, denominators)], unit, higher_is_better, "ratio", **extra)
