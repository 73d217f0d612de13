"""Learning-rate schedules and the resolution of Choco's consensus step γ."""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

from ..cache import cache_path, update_json
from ..compressors import Compressor
from ..consensus import DEFAULT_GAMMA_GRID, best_of, tune_gamma
from ..errors import BenchError
from ..topology import Topology
from .config import RunConfig

GAMMA_TUNE_DIM = 2000  # the consensus problem's dimension (the paper's)


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


def resolve_gamma(cfg: RunConfig, topology: Topology, compressor: Compressor) -> tuple[float | None, str]:
    """γ for Choco: given, 1 without compression (Choco is then D-PSGD), or tuned like the authors
    did — Choco-Gossip on ``logspace(-3, 0, 20)`` — once per (topology, n, compressor), cached."""
    from ..algorithms import ALGORITHMS

    if not ALGORITHMS.get(cfg.algorithm).consensus_step:
        return None, "unused"
    if cfg.gamma != "auto":
        return float(cfg.gamma), "given"
    if compressor.name == "none":
        return 1.0, "identity compressor"
    if topology.n == 1:
        # x̂ is the only public copy, so the consensus step γ(x̂ − x̂) is zero whatever γ is.
        return 1.0, "single worker (no consensus)"
    steps = cfg.gamma_tune_steps
    graph = topology.name if topology.kind not in ("erdos-renyi", "random-regular") else f"{topology.name}@{cfg.seed}"
    if topology.digest is not None:  # a graph from a file: the path may hold other edges than last time
        graph = f"{graph}#{topology.digest}"
    key = f"{graph}|{topology.n}|{topology.weights}|{compressor.spec}|{steps}|{GAMMA_TUNE_DIM}"
    path = cache_path("gamma.json")
    gamma = read_gamma_cache(path).get(key)
    if gamma is None:  # tuned without the lock: parallel jobs tuning other cells do not wait for each other
        # minutes on a large graph: said before and after (rank 0 only; nothing with --quiet)
        say = not cfg.quiet and os.environ.get("RANK", "0") == "0"
        if say:
            print(f"tuning γ for {compressor.spec} on {graph} n={topology.n}: {len(DEFAULT_GAMMA_GRID)} values × "
                  f"{steps} rounds of Choco-Gossip (d={GAMMA_TUNE_DIM}; cached in {path})", file=sys.stderr, flush=True)
        tick = time.perf_counter()
        traces = tune_gamma(topology, compressor.spec, DEFAULT_GAMMA_GRID, steps, GAMMA_TUNE_DIM, seed=0)
        gamma = store_gamma(path, key, best_of(traces).gamma)
        if say:
            print(f"tuned γ = {gamma:.4g} for {compressor.spec} on {graph} n={topology.n} in "
                  f"{time.perf_counter() - tick:.1f} s", file=sys.stderr, flush=True)
    return float(gamma), f"tuned on consensus ({steps} rounds, d={GAMMA_TUNE_DIM})"


def store_gamma(path: Path, key: str, gamma: float) -> float:
    """Add a tuned γ to the cache at ``path`` under its lock, keeping what parallel jobs added meanwhile
    (a γ another job stored for ``key`` since is kept: tuning is deterministic). The γ now stored."""
    return update_json(path, key, gamma, read=read_gamma_cache, keep=lambda stored: True)


def read_gamma_cache(path: Path) -> dict[str, float]:
    """The tuned γ values (none before the first tuning). A file that is not a JSON mapping to γ values
    is one line naming it, never silently replaced: it may hold hours of tuning."""
    try:
        cache = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        why = "not UTF-8 text"
    except ValueError as err:
        why = f"not JSON: {err}"
    except OSError as err:
        why = err.strerror or str(err)
    else:
        if not isinstance(cache, dict):
            why = f"a JSON {type(cache).__name__}, not a mapping to gamma values"
        else:
            bad = [(k, v) for k, v in cache.items()
                   if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1]
            if not bad:
                return cache
            why = f"entry {bad[0][0]!r} is {bad[0][1]!r}, not a gamma in (0, 1]"
    raise BenchError(f"gamma cache {path} is damaged ({why}); remove it and gamma is tuned again")
