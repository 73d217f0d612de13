"""What a task is: data + model + loss, seen by the runner as stacked flat parameters, and what it declares
of itself (options with their defaults, metrics, examples, a cluster job's resources) for the registry.

A task deals per-worker batches, returns the gradients of all n workers at once (vectorised
with torch.func where the model allows it, a loop over workers otherwise) and evaluates a
parameter vector. It knows nothing of algorithms or communication.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator

import torch

from ..errors import BenchError
from ..registry import Registry

COMMON_OPTIONS = {"vectorize"}  # options every task understands: true | false | auto (see tasks/gradients.py)
VECTORIZE = (True, False, "auto")  # the values of `vectorize`
RESOURCES = dict(mem_mb=4000, runtime=60, gpus=0, cpus=1)  # a small task's: a CPU core, an hour at most


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
    """A task declares, as class attributes: its ``name``, its ``options`` with their defaults (whose types a
    value is checked against; make_task rejects any other, bar COMMON_OPTIONS), ``metrics``, ``examples``
    and ``resources``. A task built from a setup holds in ``options`` those defaults under the setup's values."""

    name: ClassVar[str]
    options: dict[str, Any] = {}  # option -> default on the class; on a built task, the values it runs with
    metrics: ClassVar[tuple[str, ...]] = ("test_loss", "test_acc")  # what each evaluation records of the average
    # small builds the generic tests run on every task (tests/test_tasks.py): `bench run` settings, each of
    # nodes, batch_size, data and task_options optional (3 workers, batch 4, data shuffle, the defaults)
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    # what a cluster job of one run asks (workflow/rules/common.smk): memory (MB), runtime of ONE run (minutes)
    # when no plan says better, GPUs, and CPUs of a job of one process
    resources: ClassVar[dict[str, int]] = RESOURCES
    # whether the task has a vectorised gradient path next to the per-worker loop
    vectorizable: bool = False
    # whether that path pays for a single worker too (a closed form); else a process holding one worker (a dist
    # rank) takes the loop under vectorize=auto: the model's own forward and backward, none of the mapping
    vectorized_for_one: bool = False

    def __init__(self, setup: TaskSetup):
        self.setup = setup
        self.device = torch.device(setup.device)
        self.options = {**type(self).options, **setup.options}
        check_vectorize(self.options)
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


# Filled by importing every module of bench/tasks (its __init__): a module that defines a task files it with
# ``register``; the helper modules file nothing.
TASKS: Registry[type[Task]] = Registry("task")
TASKS.retire("consensus", "is not a training task: the consensus problem runs with `bench consensus` "
             "(and Choco's γ is tuned on it with `bench tune-gamma`)")


def register(cls: type[Task]) -> type[Task]:
    """Class decorator: file the task under its ``name``."""
    TASKS.register(cls.name)(cls)
    return cls


def task_option_names(name: str) -> list[str]:
    return sorted(set(TASKS.get(name).options) | COMMON_OPTIONS)


def check_option_values(name: str, options: dict) -> None:
    """Each option of the type of its default: sizes are whole numbers >= 1 (a list of them for layer widths),
    flags true or false, rates finite numbers; one line naming the option otherwise (the tasks would fail
    deep inside, e.g. ``range(0, n, 0)`` for ``eval_batch=0``). Ranges beyond these the tasks check."""
    defaults = TASKS.get(name).options
    for key, value in options.items():
        default, where = defaults.get(key), f"task_options.{key}={value!r}"
        whole = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1  # noqa: E731
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise BenchError(f"{where} must be true or false")
        elif isinstance(default, int):
            if not whole(value):
                raise BenchError(f"{where} must be a whole number >= 1")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise BenchError(f"{where} must be a finite number")
        elif isinstance(default, (tuple, list)):
            if not isinstance(value, (tuple, list)) or not all(whole(v) for v in value):
                raise BenchError(f"{where} must be a list of whole numbers >= 1, e.g. {list(default)}")


def check_vectorize(options: dict) -> None:
    """``vectorize`` (absent: auto) one of true, false or auto; a task checks it as it is built."""
    vectorize = options.get("vectorize", "auto")
    if vectorize not in VECTORIZE:
        raise BenchError(f"task_options.vectorize={vectorize!r} must be true, false or auto")
