"""Time-, epochs-, steps- and bits-to-target of one run, with an explicit status, and the median
with a bootstrap confidence interval across seeds."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd

REACHED, DIVERGED, CENSORED, NO_TARGET = "reached", "diverged", "censored", "no_target"

# columns of metrics.parquet that a crossing is read on, and the name of each result
AXES = {"time_s": "time_to_target_s", "epoch": "epochs_to_target",
        "bits_per_worker": "bits_to_target", "step": "steps_to_target"}


class Crossing(NamedTuple):
    reached: bool
    x: float          # interpolated x at the crossing; inf when never reached
    position: float   # fractional row index of the crossing, to read other columns there; inf if not


def first_crossing(x, y, target: float, increasing: bool = True) -> Crossing:
    """First x at which ``y`` reaches ``target`` (>= when ``increasing``, <= otherwise),
    linearly interpolated between the two evaluation points around the crossing."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore"):  # NaN (a diverged loss, a task without accuracy) never reaches
        hit = y >= target if increasing else y <= target
    idx = np.flatnonzero(hit)
    if idx.size == 0:
        return Crossing(False, math.inf, math.inf)
    i = int(idx[0])
    if i == 0 or not np.isfinite(y[i - 1]) or y[i] == y[i - 1]:
        return Crossing(True, float(x[i]), float(i))
    frac = (target - y[i - 1]) / (y[i] - y[i - 1])
    return Crossing(True, float(x[i - 1] + frac * (x[i] - x[i - 1])), i - 1 + float(frac))


def value_at(column, position: float) -> float:
    """Linear read of ``column`` at a fractional row position from ``first_crossing``."""
    if not math.isfinite(position):
        return math.inf
    col = np.asarray(column, dtype=float)
    lo = int(math.floor(position))
    frac = position - lo
    if frac == 0.0 or lo + 1 >= len(col):
        return float(col[lo])
    return float(col[lo] + frac * (col[lo + 1] - col[lo]))


def increasing_metric(metric: str) -> bool:
    """Accuracies improve upwards; losses, perplexity, sub-optimality and consensus distance
    improve downwards."""
    return "acc" in metric


def time_to_target(points: pd.DataFrame, target: float, metric: str = "test_acc",
                   increasing: bool | None = None, status: str | None = None) -> dict:
    """Crossing of ``target`` by ``metric`` in the evaluation points of ONE run.

    ``status`` (the run's) defaults to the ``status`` column of ``points``. Unreached values
    are ``inf`` with ``tta_status`` "diverged" (the run diverged) or "censored" (it ended, or
    is still running, without reaching); a missing target gives "no_target" and NaN values."""
    if increasing is None:
        increasing = increasing_metric(metric)
    if status is None:
        status = str(points["status"].iloc[0]) if "status" in points and len(points) else "completed"
    if target is None or not math.isfinite(float(target)):
        return {"tta_status": NO_TARGET, **{name: math.nan for name in AXES.values()}}
    pts = points.sort_values("step")
    crossing = first_crossing(pts["step"], pts[metric], float(target), increasing)
    if not crossing.reached:
        return {"tta_status": DIVERGED if status == "diverged" else CENSORED,
                **{name: math.inf for name in AXES.values()}}
    return {"tta_status": REACHED,  # an axis the runs did not record (an old or damaged metrics file) is NaN
            **{name: value_at(pts[col], crossing.position) if col in pts else math.nan
               for col, name in AXES.items()}}


def summarize_seeds(values, n_boot: int = 2000, level: float = 0.95, seed: int = 0):
    """(median, ci_low, ci_high) of per-seed values: percentile bootstrap of the median.

    NaN values are dropped; inf values (unreached targets) are kept, so the median is inf when
    most seeds never reached. One value gives that value three times."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    median = float(np.median(v))
    if v.size == 1:
        return median, median, median
    rng = np.random.default_rng(seed)
    boot = np.sort(np.median(rng.choice(v, size=(n_boot, v.size), replace=True), axis=1))
    # order statistics rather than np.percentile: interpolating between two infs gives NaN
    alpha = (1.0 - level) / 2.0
    lo = float(boot[int(math.floor(alpha * (n_boot - 1)))])
    hi = float(boot[int(math.ceil((1.0 - alpha) * (n_boot - 1)))])
    # with few seeds the bootstrap distribution is lumpy; the interval must still hold the median
    return median, min(lo, median), max(hi, median)
