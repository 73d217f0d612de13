"""A consensus step γ left to ``auto``, found by the method itself: its own gossip (its step with no gradient)
over the authors' grid ``logspace(-3, 0, 20)``, once per (graph, n, weights, compressor, rounds), cached
(bench/cache.py). Choco tunes on Choco-Gossip, as the paper's authors did; BEER and DeepSqueeze on theirs. The
knobs of such a method (``ConsensusStepOptions``) and the mixin that finds its step (``TunesItsStep``)."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..cache import cache_path, update_json
from ..errors import BenchError
from ..files import read_regular
from .gossip import DEFAULT_GAMMA_GRID, best_of, tune_gamma
from .knobs import AUTO, KnobOptions, knob, read_rounds, read_step

GAMMA_TUNE_DIM = 2000  # the consensus problem's dimension (the paper's)


@dataclass(frozen=True)
class ConsensusStepOptions(KnobOptions):
    """The knobs of a method with a consensus step γ."""

    # γ in (0, 1], or auto: tuned by the method on its own gossip (grad = 0) over logspace(-3, 0, 20), as the
    # paper's authors tuned Choco's, once per (graph, n, compressor), cached; 1 under exact messages
    gamma: float | str = knob(AUTO, read_step, shortcut=True, tune=True, low=0.0, high=1.0, planned=0.5)
    # gossip rounds per γ of the grid under auto; bounded: 20 values x 100,000 rounds already take an hour on a
    # large graph, and 10^12 rounds ran on with no word
    gamma_tune_steps: int = knob(1000, read_rounds, shortcut=True, high=100_000,
                                 why_high="20 values of the grid x this many rounds of gossip")


class TunesItsStep:
    """Mixin of an Algorithm whose options have ``gamma`` and ``gamma_tune_steps`` (ConsensusStepOptions)."""

    @classmethod
    def resolve_options(cls, options, topology, compressor, seed: int = 0, quiet: bool = True):
        if options.gamma != AUTO:
            return options, {"gamma": {"value": float(options.gamma), "source": "given"}}
        if compressor.name == "none":
            gamma, source = 1.0, "identity compressor"
        elif topology.n == 1:
            # x̂ is the only public copy, so the consensus step γ(x̂ − x̂) is zero whatever γ is.
            gamma, source = 1.0, "single worker (no consensus)"
        else:
            gamma = tuned_gamma(cls.name, topology, compressor, options.gamma_tune_steps, seed, quiet)
            gossip = "consensus" if cls.name == "choco" else f"{cls.name}'s gossip"
            source = f"tuned on {gossip} ({options.gamma_tune_steps} rounds, d={GAMMA_TUNE_DIM})"
        return dataclasses.replace(options, gamma=gamma), {"gamma": {"value": gamma, "source": source}}


def tuned_gamma(method: str, topology, compressor, steps: int, seed: int, quiet: bool) -> float:
    """The best γ of the grid for ``method``'s gossip on ``topology`` with ``compressor``, from the cache or
    tuned now (minutes on a large graph: said before and after, by rank 0 only, nothing when ``quiet``)."""
    graph = topology.name if topology.kind not in ("erdos-renyi", "random-regular") else f"{topology.name}@{seed}"
    if topology.digest is not None:  # a graph from a file: the path may hold other edges than last time
        graph = f"{graph}#{topology.digest}"
    key = f"{graph}|{topology.n}|{topology.weights}|{compressor.spec}|{steps}|{GAMMA_TUNE_DIM}"
    if method != "choco":  # Choco's entries keep the key they had before other methods tuned their own
        key = f"{method}|{key}"
    path = cache_path("gamma.json")
    gamma = read_gamma_cache(path).get(key)
    if gamma is None:  # tuned without the lock: parallel jobs tuning other cells do not wait for each other
        say = not quiet and os.environ.get("RANK", "0") == "0"
        gossip = "Choco-Gossip" if method == "choco" else f"{method}'s gossip"
        if say:
            print(f"tuning γ for {compressor.spec} on {graph} n={topology.n}: {len(DEFAULT_GAMMA_GRID)} values × "
                  f"{steps} rounds of {gossip} (d={GAMMA_TUNE_DIM}; cached in {path})", file=sys.stderr, flush=True)
        tick = time.perf_counter()
        traces = tune_gamma(topology, compressor.spec, DEFAULT_GAMMA_GRID, steps, GAMMA_TUNE_DIM, seed=0,
                            method=method)
        gamma = store_gamma(path, key, best_of(traces, f"{gossip} on {graph} n={topology.n}").gamma)
        if say:
            print(f"tuned γ = {gamma:.4g} for {compressor.spec} on {graph} n={topology.n} in "
                  f"{time.perf_counter() - tick:.1f} s", file=sys.stderr, flush=True)
    return float(gamma)


def store_gamma(path: Path, key: str, gamma: float) -> float:
    """Add a tuned γ to the cache at ``path`` under its lock, keeping what parallel jobs added meanwhile
    (a γ another job stored for ``key`` since is kept: tuning is deterministic). The γ now stored."""
    return update_json(path, key, gamma, read=read_gamma_cache, keep=lambda stored: True)


def read_gamma_cache(path: Path) -> dict[str, float]:
    """The tuned γ values (none before the first tuning). A file that is not a JSON mapping to γ values
    is one line naming it, never silently replaced: it may hold hours of tuning."""
    try:
        cache = json.loads(read_regular(path))
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
