"""Learning-rate schedules and step counts (a knob left to ``auto`` is found by its algorithm:
bench/algorithms/step_tuning.py)."""
from __future__ import annotations

import math

from .config import RunConfig


def step_counts(epochs: float, steps_per_epoch: int, eval_every: float) -> tuple[int, int, int]:
    """A run's (total steps, steps between evaluations, evaluations): the runner evaluates before the
    first step, every ``eval_every`` epochs and after the last step."""
    total = max(1, math.ceil(epochs * steps_per_epoch))
    every = max(1, round(eval_every * steps_per_epoch))
    return total, every, 1 + math.ceil(total / every)


def lr_at(cfg: RunConfig, epoch: float) -> float:
    """Learning rate at a (fractional) epoch."""
    if cfg.lr_schedule == "constant":
        return cfg.lr
    if cfg.lr_schedule == "exp":
        return cfg.lr * cfg.lr_decay ** epoch
    # warm-up from lr/10 to lr over warmup_epochs (linear), then ×lr_decay at each milestone
    if cfg.warmup_epochs and epoch < cfg.warmup_epochs:
        start = cfg.lr / 10
        return start + (cfg.lr - start) * epoch / cfg.warmup_epochs
    passed = sum(1 for m in cfg.milestones if epoch >= m)
    return cfg.lr * cfg.lr_decay ** passed
