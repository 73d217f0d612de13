"""Dealing training indices to n workers and drawing their per-step batches (i.i.d. or not)."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import torch
from torch import Tensor

from ..errors import BenchError
from ..specs import Spec, number, parse_spec, spell

SCHEMES = "shuffle, split, sorted, dirichlet:ALPHA"
_FIXED, _EPOCH = 0, 1  # tags that keep the fixed deal's random stream apart from the epochs' streams


def alpha(spec: Spec) -> float:
    """α of ``dirichlet:α``, a finite number > 0."""
    try:
        value = float(spec.arg) if spec.arg is not None else float("nan")
    except ValueError:
        value = float("nan")
    if not value > 0 or not np.isfinite(value):
        raise BenchError(f"dirichlet concentration {spec.arg!r} in {spec.text!r} must be a number > 0, "
                         "e.g. dirichlet:0.5")
    return value


# the deals, each with the reader of its numeric argument (None: it takes none) and no options
DEALS = {"shuffle": None, "split": None, "sorted": None, "dirichlet": alpha}


def deal_of(scheme: str) -> Spec:
    """The parsed ``scheme``, or one line when it names no deal (or gives one an argument or options it lacks)."""
    spec = parse_spec(scheme)
    if spec.name not in DEALS or spec.options or (spec.arg is not None and DEALS[spec.name] is None):
        raise BenchError(f"unknown partition scheme {scheme!r}; allowed: {SCHEMES}")
    return spec


def canonical(scheme: str) -> str:
    """The one spelling of the deal ``scheme`` names: dirichlet:0.10 and dirichlet:1e-1 are dirichlet:0.1, and
    dirichlet:10.0 is dirichlet:10. A scheme that does not parse is returned as it is, for the deal to refuse."""
    try:
        spec = deal_of(scheme)
        reader = DEALS[spec.name]
        return spell(spec.name, number(reader(spec)) if reader is not None else None)
    except BenchError:
        return scheme


class WorkerBatches:
    """Index batches ``[n_workers, batch_size]`` for each step of an epoch.

    - ``shuffle``: every epoch all indices are reshuffled and dealt anew (the paper's Table 1 setting);
    - ``split``: one random i.i.d. deal, fixed for the run;
    - ``sorted``: indices sorted by label, dealt in contiguous blocks (each worker sees few classes);
    - ``dirichlet:α``: per class, the share of each worker drawn from Dirichlet(α), fixed. Drawn again until
      every worker holds a batch; where 100 draws never give that (α = 0.01 puts each class on about one
      worker, so 16 workers and 10 classes leave some empty), the last draw is topped up: each short worker
      takes samples at random from the largest shard until it holds one batch (the skew stays extreme).
    Within a fixed shard the order is reshuffled every epoch. Everything is a function of
    (seed, epoch), so a resumed run can start at any epoch and see the same batches.
    """

    def __init__(self, labels: Tensor, n_workers: int, batch_size: int, scheme: str = "shuffle", seed: int = 0):
        if n_workers < 1 or batch_size < 1:
            raise BenchError(f"n_workers={n_workers} and batch_size={batch_size} must be positive")
        if seed < 0:
            raise BenchError(f"seed {seed} must be non-negative")
        self.labels = labels.detach().cpu().reshape(-1)
        self.n_workers, self.batch_size, self.seed, self.scheme = n_workers, batch_size, seed, scheme
        spec = deal_of(scheme)
        self.kind = spec.name
        n = len(self.labels)
        if self.kind in ("shuffle", "split"):
            self._fixed = None if self.kind == "shuffle" else self._deal(self._rng(_FIXED).permutation(n))
        elif self.kind == "sorted":
            order = np.argsort(self._int_labels(), kind="stable")
            self._fixed = self._deal(order)
        else:
            self._fixed = self._dirichlet(alpha(spec))
        self._fixed64: list[np.ndarray] | None = None
        self._whole: Tensor | None = None  # a fixed deal's one full batch [n_workers, batch_size] (epoch)
        self.shard_sizes = [len(s) for s in self.shards(0)]
        # full-batch training: one step an epoch, whose batch is every worker's whole shard
        self.full_batch = self.steps_per_epoch == 1 and all(size == batch_size for size in self.shard_sizes)
        smallest = min(self.shard_sizes)
        if smallest < batch_size:
            raise BenchError(
                f"batch_size {batch_size} is larger than the smallest shard ({smallest} samples) "
                f"under {scheme!r} with {n_workers} workers and {n} samples"
            )

    def _rng(self, *tags: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, *tags])

    def _int_labels(self) -> np.ndarray:
        if self.labels.dtype.is_floating_point or self.labels.dtype == torch.bool:
            raise BenchError(f"partition scheme {self.scheme!r} needs integer class labels, got {self.labels.dtype}")
        return self.labels.numpy().astype(np.int64)

    def _deal(self, order: np.ndarray) -> list[np.ndarray]:
        # Contiguous near-equal blocks (sizes differ by at most one): no sample is dropped.
        return np.array_split(order, self.n_workers)

    def _dirichlet(self, alpha: float) -> list[np.ndarray]:
        labels = self._int_labels()
        rng = self._rng(_FIXED)
        by_class = [rng.permutation(np.flatnonzero(labels == c)) for c in range(int(labels.max()) + 1)]
        # Small α can leave a worker (almost) empty; redraw, as is common practice, until every worker
        # can fill a batch. The redraws come from the same seeded stream, so the deal stays reproducible.
        for _ in range(100):
            shards: list[list[np.ndarray]] = [[] for _ in range(self.n_workers)]
            for members in by_class:
                shares = rng.dirichlet(np.full(self.n_workers, alpha))
                cuts = np.round(np.cumsum(shares)[:-1] * len(members)).astype(int)
                for worker, part in enumerate(np.split(members, cuts)):
                    shards[worker].append(part)
            dealt = [np.concatenate(parts) for parts in shards]
            if min(len(s) for s in dealt) >= self.batch_size:
                return dealt
        return self._top_up(dealt, rng)

    def _top_up(self, dealt: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
        """Each worker short of a batch given samples drawn from the then largest shard (no sample is dealt
        twice); the size check in __init__ reports a data set too small for n_workers × batch_size."""
        if len(self.labels) < self.n_workers * self.batch_size:
            return dealt
        dealt = [d.copy() for d in dealt]
        for worker in range(self.n_workers):
            while len(dealt[worker]) < self.batch_size:
                donor = int(np.argmax([len(d) for d in dealt]))
                take = min(self.batch_size - len(dealt[worker]), len(dealt[donor]) - self.batch_size)
                picked = rng.choice(len(dealt[donor]), size=take, replace=False)
                dealt[worker] = np.concatenate([dealt[worker], dealt[donor][picked]])
                dealt[donor] = np.delete(dealt[donor], picked)
        return dealt

    def shards(self, epoch: int = 0) -> list[Tensor]:
        """Indices held by each worker in ``epoch`` (the same every epoch except under ``shuffle``)."""
        return [torch.from_numpy(s.copy()) for s in self._shard_arrays(epoch)]  # the caller's own tensors

    def _shard_arrays(self, epoch: int) -> list[np.ndarray]:
        """``shards`` as int64 arrays; a fixed deal's are converted once."""
        if self._fixed is not None:
            if self._fixed64 is None:
                self._fixed64 = [s.astype(np.int64) for s in self._fixed]
            return self._fixed64
        order = self._rng(_EPOCH, epoch).permutation(len(self.labels))
        return [s.astype(np.int64) for s in self._deal(order)]

    @property
    def steps_per_epoch(self) -> int:
        return self.steps_for(len(self.labels), self.n_workers, self.batch_size)

    @staticmethod
    def steps_for(size: int, n_workers: int, batch_size: int) -> int:
        """Steps of an epoch over ``size`` samples (`bench plan` asks it for the real data sizes)."""
        # An epoch is one pass over the data set at the mean shard size, whatever the deal: unequal
        # (Dirichlet) shards would otherwise cut every epoch down to what the smallest shard holds.
        return max(1, (size // n_workers) // batch_size)

    def epoch(self, e: int) -> Iterator[Tensor]:
        """Yield ``steps_per_epoch`` index tensors shaped ``[n_workers, batch_size]``."""
        if e < 0:
            raise BenchError(f"epoch {e} must be non-negative")
        used = self.steps_per_epoch * self.batch_size
        if self.full_batch:
            # every worker's one batch is its whole shard: the order inside a batch does not change what it holds,
            # so nothing is drawn; a fixed deal gives the same tensor every epoch (a task may keep what it fetched)
            whole = self._whole if self._fixed is not None else None
            if whole is None:
                whole = torch.from_numpy(np.stack(self._shard_arrays(e)))
                self._whole = whole if self._fixed is not None else None
            yield whole
            return
        rng = self._rng(_EPOCH, e, 1)  # separate from the shuffle deal's stream of the same epoch
        # Every worker takes the same number of steps (synchronous rounds): a shard larger than that
        # leaves a surplus unused this epoch (a different one each epoch, after the reshuffle); a
        # smaller one is cycled through, reshuffled at each pass, so no sample repeats before all
        # of the shard has been seen.
        rows = []
        for shard in self._shard_arrays(e):  # numpy throughout, one tensor at the end: a one-step epoch pays this
            passes = -(-used // len(shard))  # every step (full-batch runs), so its per-call overhead counts
            perms = [rng.permutation(len(shard)) for _ in range(passes)]
            rows.append(shard[(perms[0] if passes == 1 else np.concatenate(perms))[:used]])
        stacked = torch.from_numpy(np.stack(rows)).view(self.n_workers, self.steps_per_epoch, self.batch_size)
        for step in range(self.steps_per_epoch):
            yield stacked[:, step]

    def label_histogram(self, epoch: int = 0) -> Tensor:
        """Counts ``[n_workers, num_classes]`` of each worker's shard in ``epoch``."""
        labels = torch.from_numpy(self._int_labels())
        num_classes = int(labels.max()) + 1
        return torch.stack([torch.bincount(labels[s], minlength=num_classes) for s in self.shards(epoch)])
