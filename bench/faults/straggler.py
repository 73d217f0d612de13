"""How long a synchronous round computes when workers are slow: every worker's compute time of a step is the
step's time times its factor, and the round waits for the slowest, so the round's factor is the largest.
``fixed`` slow workers make it their factor at every step; ``exponential`` draws 1 + Exp(mean) per worker
and step from a generator seeded by (SALT, seed, step): the same in every process, on resume and on replay."""
from __future__ import annotations

import numpy as np

from .spec import Straggler

SALT = 0x51_0E57  # apart from the loss schedule's draws and every other stream of the run


def worker_factors(straggler: Straggler, n: int, seed: int, step: int) -> np.ndarray:
    """[n] each worker's compute time of ``step`` as a multiple of the step's time."""
    if straggler.model == "fixed":
        factors = np.ones(n)
        factors[list(straggler.workers)] = straggler.factor
        return factors
    return 1.0 + np.random.default_rng([SALT, int(seed), int(step)]).exponential(straggler.mean, n)


def round_factor(straggler: Straggler | None, n: int, seed: int, step: int) -> float:
    """The synchronous round's compute time of ``step`` as a multiple of the step's time (1 without stragglers)."""
    return 1.0 if straggler is None else float(worker_factors(straggler, n, seed, step).max())
