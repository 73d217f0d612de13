"""Containers for loaded data sets and the registry of their loaders: ``load_dataset("mnist1d", seed=0)``."""
from __future__ import annotations

import contextvars
import inspect
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from ..errors import BenchError
from ..files import atomic_write
from ..registry import Registry


@dataclass
class ClassificationData:
    """Whole data set in memory. ``train_y`` is int64 class ids (float targets for regression)."""

    train_x: Tensor
    train_y: Tensor
    test_x: Tensor
    test_y: Tensor
    num_classes: int  # 0 for regression targets
    name: str
    # per-channel (mean, std) when the images are stored as uint8 pixels (4× smaller, e.g. on the
    # device): consumers turn a gathered batch into floats with `as_float`
    pixel_stats: tuple[tuple[float, ...], tuple[float, ...]] | None = field(default=None, kw_only=True)

    def as_float(self, x: Tensor) -> Tensor:
        """Model inputs from stored values: uint8 pixels scaled to [0, 1] and normalised per channel."""
        if self.pixel_stats is None:
            return x
        mean, std = (torch.tensor(v, device=x.device).view(1, -1, 1, 1) for v in self.pixel_stats)
        return x.to(torch.float32).div_(255.0).sub_(mean).div_(std)


@dataclass
class SyntheticData(ClassificationData):
    """A synthetic problem whose optimum is known, so sub-optimality f(x) - f* can be reported."""

    w_star: Tensor  # float64 weights that generated the targets
    w_opt: Tensor  # float64 minimiser of the training loss (differs from w_star through noise)
    optimum_loss: float  # training loss at w_opt; see the loader for the loss it refers to
    l2: float = 0.0  # L2 regularisation weight included in optimum_loss


@dataclass
class LanguageData:
    """Token streams of a language-modelling corpus (1-D int64 ids into ``vocab``)."""

    train: Tensor
    valid: Tensor
    test: Tensor
    vocab: list[str]
    name: str


# Whether loaders say what a long preparation is doing (generating a data set, indexing a folder tree):
# `bench run` turns it on (but with --quiet, and on the ranks of a distributed run other than 0); other
# callers (tests, `bench plan`) load silently.
_NOTES: contextvars.ContextVar[bool] = contextvars.ContextVar("bench_data_notes", default=False)


def note(text: str) -> None:
    """One line on stderr about data preparation (flushed: a batch job's log is read while it runs)."""
    if _NOTES.get():
        print(text, file=sys.stderr, flush=True)


@contextmanager
def notes(on: bool):
    """Let the loaders called inside the block say what they prepare (``on``) or keep them silent."""
    token = _NOTES.set(on)
    try:
        yield
    finally:
        _NOTES.reset(token)


Loader = Callable[..., Any]
DATASETS: Registry[Loader] = Registry("dataset")


def load_dataset(name: str, root: str | None = None, seed: int = 0, **options: Any) -> Any:
    """Load the registered data set ``name``; unknown options are a BenchError, not a TypeError."""
    loader = DATASETS.get(name)
    params = inspect.signature(loader).parameters
    allowed = sorted(p for p in params if p not in ("root", "seed"))
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise BenchError(
            f"unknown option {unknown[0]!r} for dataset {name!r}; allowed options: {', '.join(allowed) or 'none'}"
        )
    return loader(root, seed, **options)


def save_npz_atomic(path: Path, **arrays: np.ndarray) -> None:
    """Write to a temporary file in the same directory, then rename: a killed run never leaves
    a truncated cache that a later run would trust."""
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as handle:  # a handle: given a name, np.savez would append .npz to it
            np.savez(handle, **arrays)

    atomic_write(path, write)


def check_positive(name: str, **values: int) -> None:
    for key, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise BenchError(f"{key}={value!r} for dataset {name!r} must be a positive integer")
