"""When each worker of an asynchronous method finishes a gradient, and which neighbour it then averages with:
the event model of AD-PSGD (bench/algorithms/adpsgd.py), numpy only.

Worker i's k-th gradient (k = 0, 1, ...) takes ``worker_factors(straggler, n, seed, k)[i]`` step-units
(straggler.py; 1 for everyone without stragglers), and its k-th completion is the running sum of its durations.
All completions, sorted by (time, worker), are cut into *waves*: a wave is a maximal run of consecutive
completions in which no worker appears twice, so the next wave starts at the first completion of a worker
already in the current one. Without stragglers wave w is every worker at time w + 1; with one worker 4 times
slower, that worker is in every 4th wave. Each completion's neighbour is drawn uniformly from the worker's
neighbours by a generator seeded by (SALT, seed, wave): a pure function of the seed and the wave, the same on
resume. The completion times are a chain over the waves, so like the Gilbert-Elliott chain of schedule.py
it is run forward and kept; asking for an earlier wave replays it from wave 0."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .spec import Straggler
from .straggler import worker_factors

SALT = 0xAD_95_6D  # the neighbour draws, apart from the straggler factors and the loss schedule


@dataclass(frozen=True)
class Wave:
    """One wave: its completions in order (``workers``, each one's neighbour ``peers``, -1 for a worker
    without neighbours, and their ``times``), and ``advance``, the time from the previous wave's last
    completion to this one's, in step-units."""
    index: int
    workers: np.ndarray
    peers: np.ndarray
    times: np.ndarray
    advance: float

    @property
    def end(self) -> float:
        return float(self.times[-1])


class Waves:
    """The waves of a run on a static graph (``neighbours[i]``: worker i's neighbours), with its stragglers
    (None: none) and seed; ``wave(w)`` for any w, cheapest in increasing order."""

    def __init__(self, straggler: Straggler | None, neighbours: Sequence[Sequence[int]], seed: int):
        self.straggler, self.seed, self.n = straggler, int(seed), len(neighbours)
        self._neighbours = [np.asarray(nb, dtype=np.int64) for nb in neighbours]
        self._degree = np.array([len(nb) for nb in self._neighbours], dtype=np.int64)
        self._restart()

    def _restart(self) -> None:
        n = self.n
        self._built = 0  # waves worked out so far
        self._end = 0.0  # the time of the last completion of the last one
        self._last: Wave | None = None
        self._rows: dict[int, np.ndarray] = {}  # factor rows k that some worker has still to run
        self._k = np.zeros(n, dtype=np.int64)  # each worker's gradient under way
        self._due = self._factors(0).copy()  # when it completes

    def _factors(self, k: int) -> np.ndarray:
        if self.straggler is None:
            return np.ones(self.n)
        if k not in self._rows:
            self._rows[k] = worker_factors(self.straggler, self.n, self.seed, k)
        return self._rows[k]

    def _next_wave(self) -> Wave:
        seen = np.zeros(self.n, dtype=bool)
        workers, times = [], []
        while True:
            i = int(np.argmin(self._due))  # the earliest; the lowest worker among equal times
            if seen[i]:
                break
            seen[i] = True
            workers.append(i)
            times.append(float(self._due[i]))
            self._k[i] += 1
            self._due[i] += self._factors(int(self._k[i]))[i]  # a running sum, as np.cumsum adds
        low = int(self._k.min())
        for k in [k for k in self._rows if k < low]:
            del self._rows[k]
        w = self._built
        workers_a = np.array(workers, dtype=np.int64)
        degree = self._degree[workers_a]
        picks = np.random.default_rng([SALT, self.seed, w]).integers(0, np.maximum(degree, 1))
        peers = np.array([self._neighbours[i][p] if d else -1 for i, p, d in zip(workers, picks, degree)],
                         dtype=np.int64)
        wave = Wave(w, workers_a, peers, np.array(times), times[-1] - self._end)
        self._built, self._end, self._last = w + 1, times[-1], wave
        return wave

    def wave(self, w: int) -> Wave:
        """Wave ``w`` (0, 1, ...): the completions in it, their neighbours and the clock's advance."""
        w = int(w)
        if w < 0:
            raise ValueError(f"wave {w} < 0")
        if self._last is not None and self._last.index == w:
            return self._last
        if w < self._built:
            self._restart()
        while True:
            wave = self._next_wave()
            if wave.index == w:
                return wave
