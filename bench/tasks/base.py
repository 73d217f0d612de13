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

from ..catalog import tasks as catalog
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
    # set by ``register`` from the task's entry in bench/catalog/tasks.py: its options and their defaults
    # (make_task rejects any other) and what each evaluation records of the averaged model
    default_options: dict[str, Any] = {}
    metric_names: tuple[str, ...] = ("test_loss", "test_acc")
    # whether the task has a vectorised gradient path next to the per-worker loop
    vectorizable: bool = False
    # whether that path pays for a single worker too (a closed form); else a process holding one worker (a dist
    # rank) takes the loop under vectorize=auto: the model's own forward and backward, none of the mapping
    vectorized_for_one: bool = False

    def __init__(self, setup: TaskSetup):
        self.setup = setup
        self.device = torch.device(setup.device)
        self.options = {**self.default_options, **setup.options}
        catalog.check_vectorize(self.options)
        # "vmap" | "loop" once settled by prepare() (or restored from a checkpoint)
        self.gradient_path: str | None = None
        self.gradient_path_info: dict[str, Any] | None = None

    # -- sizes -----------------------------------------------------------------------------
    d: int
    segments: list[int]  # per-tensor sizes (per-layer compression)
    train_size: int
    test_size: int
    steps_per_epoch: int

    def largest_tensor(self) -> int | None:
        """Entries of the largest tensor this process's training and evaluation make, where the task knows it
        (a small problem then runs one intra-op thread: bench/run/threads.py); None where it does not."""
        return None

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        """Each segment's tensor shape (a model's parameter shapes); flat by default."""
        flat = getattr(self, "flat", None)
        return [tuple(s) for s in flat.shapes] if flat is not None else [(s,) for s in self.segments]

    def decay_mask(self) -> torch.Tensor | None:
        return None

    # -- training --------------------------------------------------------------------------
    @abstractmethod
    def init_params(self) -> torch.Tensor:
        """Initial parameters of the local workers, ``[hi - lo, d]`` (every worker the same model)."""

    def prepare(self, x: torch.Tensor) -> None:
        """Settle the gradient path (vectorised or loop) before training, by the ``vectorize``
        option and a rule that reads no timing (gradients.choose_path); a path restored from a
        checkpoint is kept."""
        if self.gradient_path is not None:
            return
        from .gradients import choose_path

        self.gradient_path, self.gradient_path_info = choose_path(self, x)

    def warm_up(self, x: torch.Tensor, epoch: int = 0) -> None:
        """One untimed gradient step on the settled path, undone (state and generators), so that the
        first timed step carries no one-off set-up; the runner calls it before its first step."""
        from .gradients import warm_up

        self.prepare(x)
        warm_up(self, x, epoch)

    def use_path(self, path: str, reason: str) -> None:
        """Impose a path (e.g. the one every process of a distributed run agreed on)."""
        if path != self.gradient_path:
            self.gradient_path = path
            self.gradient_path_info = {**(self.gradient_path_info or {}), "path": path, "reason": reason}

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

    def evaluate_workers(self, x: torch.Tensor, buffers: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Test loss and accuracy of each local model (rows of ``x [k, d]``, with ``buffers [k, nb]``):
        {"test_loss": [k], "test_acc": [k]} in float64. This one evaluates the models in turn; tasks
        with a vectorised forward pass override it."""
        scores = [self.evaluate(x[i], None if buffers is None else buffers[i]) for i in range(len(x))]
        return {key: torch.tensor([s[key] for s in scores], dtype=torch.float64) for key in ("test_loss", "test_acc")}

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
        out = {"name": self.name, "n_params": self.d, "train_size": self.train_size,
               "test_size": self.test_size, "steps_per_epoch": self.steps_per_epoch, "options": self.options}
        if self.gradient_path_info is not None:
            out["gradient_path"] = self.gradient_path_info
        return out

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"gradient_path": self.gradient_path, "gradient_path_info": self.gradient_path_info}

    def load_state_dict(self, state: dict) -> None:
        self.gradient_path = state.get("gradient_path")
        self.gradient_path_info = state.get("gradient_path_info")


TASKS: Registry[type[Task]] = Registry("task")
for _name, _where in catalog.TASKS.retired().items():
    TASKS.retire(_name, _where)


def register(cls: type[Task]) -> type[Task]:
    """Class decorator: file the task under its ``name`` with its catalog entry's options and metrics,
    which are written there alone."""
    if cls.name not in catalog.TASKS:
        raise RuntimeError(f"task {cls.name!r} has no entry in bench/catalog/tasks.py")
    if {"default_options", "metric_names"} & set(vars(cls)):
        raise RuntimeError(f"task {cls.name!r} sets its own options or metrics; they are its entry in "
                           "bench/catalog/tasks.py")
    info = catalog.TASKS.get(cls.name)
    cls.default_options, cls.metric_names = info.options, info.metrics
    TASKS.register(cls.name)(cls)
    return cls
