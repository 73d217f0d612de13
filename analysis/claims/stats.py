"""The two tests a verdict states: a percentile bootstrap interval of a mean of paired differences, and a
one-sided permutation test of Spearman's rank correlation. Both are seeded, so a verdict is a function of
the results alone."""
from __future__ import annotations

import itertools
import math

import numpy as np

N_BOOT = 10_000
EXACT_UP_TO = 8  # permutations enumerated exactly up to this many points (8! = 40,320), sampled beyond
N_PERMUTATIONS = 20_000


def bootstrap_mean(values, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): the mean of ``values`` and its percentile bootstrap interval. Infinite values are
    kept (a target one run never reached); one value is its own interval."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or np.isnan(v).any():
        raise ValueError("bootstrap_mean needs finite or infinite values, no NaN")
    mean = float(v.mean()) if not np.isinf(v).any() else (math.inf if (v == math.inf).any() else -math.inf)
    if v.size == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore"):
        boot = np.sort(rng.choice(v, size=(N_BOOT, v.size), replace=True).mean(axis=1))
    alpha = (1.0 - level) / 2.0
    low = float(boot[int(math.floor(alpha * (N_BOOT - 1)))])
    high = float(boot[int(math.ceil((1.0 - alpha) * (N_BOOT - 1)))])
    return mean, min(low, mean), max(high, mean)


def spearman_test(x, y, alternative: str, seed: int = 0) -> tuple[float, float]:
    """(ρ, p) of Spearman's rank correlation of ``x`` and ``y`` and the permutation p-value of the
    one-sided ``alternative`` ("greater": ρ > 0, "less": ρ < 0): the share of orderings of y whose ρ is at
    least as extreme, counting the observed one. Exact up to EXACT_UP_TO points."""
    from scipy import stats  # imported where used: 0.5 s a process
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be greater or less, not {alternative!r}")
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size != y.size or x.size < 3:
        raise ValueError("spearman_test needs at least 3 paired points")
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return math.nan, 1.0
    rho = float(np.corrcoef(rx, ry)[0, 1])
    if x.size <= EXACT_UP_TO:
        orders = np.array(list(itertools.permutations(ry)))
    else:
        rng = np.random.default_rng(seed)
        orders = np.array([rng.permutation(ry) for _ in range(N_PERMUTATIONS - 1)] + [ry])
    cx = rx - rx.mean()
    null = (orders - orders.mean(axis=1, keepdims=True)) @ cx
    null /= np.sqrt((cx ** 2).sum() * ((orders - orders.mean(axis=1, keepdims=True)) ** 2).sum(axis=1))
    tol = 1e-12
    extreme = null >= rho - tol if alternative == "greater" else null <= rho + tol
    return rho, float(extreme.mean())


def interval_text(mean: float, low: float, high: float, unit: str, seeds: int, level: float = 0.95) -> str:
    return (f"{mean:.2f}{unit}, {100 * level:g} % bootstrap interval {low:.2f} to {high:.2f}, "
            f"{seeds} seed{'s' if seeds != 1 else ''}")


def spearman(x, y) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (ties share their mean rank); NaN when either is constant."""
    from scipy import stats  # imported where used: 0.5 s a process
    rx, ry = stats.rankdata(np.asarray(x, dtype=float)), stats.rankdata(np.asarray(y, dtype=float))
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def bootstrap_correlation_difference(a, b, y, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """(d, low, high): d = Spearman(a, y) − Spearman(b, y) on the points as given, and its percentile
    bootstrap interval over the points (each resample draws points with replacement and ranks again; a
    resample in which a, b or y is constant has no correlation and is left out)."""
    from scipy import stats  # imported where used: 0.5 s a process
    a, b, y = (np.asarray(v, dtype=float) for v in (a, b, y))
    if not a.size == b.size == y.size or a.size < 3:
        raise ValueError("bootstrap_correlation_difference needs at least 3 points, the same number of each")
    observed = spearman(a, y) - spearman(b, y)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, a.size, size=(N_BOOT, a.size))

    def correlations(x):
        rx, ry = stats.rankdata(x[picks], axis=1), stats.rankdata(y[picks], axis=1)
        rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (rx * ry).sum(axis=1) / np.sqrt((rx ** 2).sum(axis=1) * (ry ** 2).sum(axis=1))

    boot = correlations(a) - correlations(b)
    boot = np.sort(boot[np.isfinite(boot)])
    if boot.size == 0 or not math.isfinite(observed):
        return observed, math.nan, math.nan
    alpha = (1.0 - level) / 2.0
    low = float(boot[int(math.floor(alpha * (boot.size - 1)))])
    high = float(boot[int(math.ceil((1.0 - alpha) * (boot.size - 1)))])
    return observed, min(low, observed), max(high, observed)
