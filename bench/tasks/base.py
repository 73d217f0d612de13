"""What a task is: data + model + loss, seen by the runner as stacked flat parameters.

A task deals per-worker batches, returns the gradients of all n workers at once (vectorised
with torch.func where the model allows it, a loop over workers otherwise) and evaluates a
parameter vector. It knows nothing of algorithms or communication.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from ..registry import Registry


@dataclass(frozen=True)
class TaskSetup:
    """What every task is built from (the run's resolved settings that concern the data and model)."""

    n_workers: int
    batch_size: int  # per worker
    data: str = "shuffle"  # shuffle | split | sorted | dirichlet:α
    val_fraction: float = 0.0  # share of the training set held out for validation (never the test set)
    seed: int = 0
    device: str = "cpu"
    data_root: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # task-specific knobs (model sizes, data sizes)
    rows: tuple[int, int] | None = None  # workers lo..hi-1 held by this process (None: all of them)

    @property
    def lo(self) -> int:
        return 0 if self.rows is None else self.rows[0]

    @property
    def hi(self) -> int:
        return self.n_workers if self.rows is None else self.rows[1]

    @property
    def local_workers(self) -> int:
        return self.hi - self.lo


class Task(ABC):
    name: str
    has_gradient: bool = True
    metric_names: tuple[str, ...] = ("test_loss", "test_acc")
    # task options and their defaults; unknown keys are rejected by make_task
    default_options: dict[str, Any] = {}

    def __init__(self, setup: TaskSetup):
        self.setup = setup
        self.device = torch.device(setup.device)
        self.options = {**self.default_options, **setup.options}

    # -- sizes -----------------------------------------------------------------------------
    d: int
    segments: list[int]  # per-tensor sizes (per-layer compression)
    train_size: int
    test_size: int
    steps_per_epoch: int

    def decay_mask(self) -> torch.Tensor | None:
        return None

    # -- training --------------------------------------------------------------------------
    @abstractmethod
    def init_params(self) -> torch.Tensor:
        """Initial parameters of the local workers, ``[hi - lo, d]`` (every worker the same model,
        except for consensus)."""

    def start_epoch(self, epoch: int) -> None:
        """Reset per-epoch worker state (e.g. recurrent hidden states)."""

    @abstractmethod
    def batches(self, epoch: int) -> Iterator[Any]:
        """The ``steps_per_epoch`` batches of ``epoch``; a function of (seed, epoch) only."""

    @abstractmethod
    def gradients(self, x: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients ``[w, d]`` and minibatch losses ``[w]`` of the local workers at the rows of ``x``
        (batches are dealt for all n workers; a task takes the rows lo..hi-1)."""

    # -- evaluation ------------------------------------------------------------------------
    @abstractmethod
    def evaluate(self, flat: torch.Tensor, buffers: torch.Tensor | None = None) -> dict[str, float]:
        """Metrics of one model (a ``[d]`` vector) on the test set, plus ``train_loss`` (and ``val_*``
        on the validation split when the task was built with ``val_fraction > 0``)."""

    def averaged_buffers(self) -> torch.Tensor | None:
        """Non-trained state (BatchNorm statistics) for the averaged model, or None."""
        return None

    def worker_buffers(self, i: int) -> torch.Tensor | None:
        """Buffers of local worker ``i`` (0-based among this process's workers)."""
        return None

    def local_buffers(self) -> torch.Tensor | None:
        """``[w, nb]`` buffers of the local workers, for averaging across processes."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "n_params": self.d, "train_size": self.train_size,
                "test_size": self.test_size, "steps_per_epoch": self.steps_per_epoch, "options": self.options}

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


TASKS: Registry[type[Task]] = Registry("task")
