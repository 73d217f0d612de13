"""The training tasks as a study names them, before any data set or model exists: each task's options with
their defaults (whose types the values are checked against) and the metrics it records.

This is their one home: each task class of bench/tasks (which imports torch) is filed with its entry's options
and metrics (bench.tasks.base.register), and bench.tasks checks a run's options with the functions here."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import BenchError
from ..registry import Registry

COMMON_OPTIONS = {"vectorize"}  # options every task understands: true | false | auto (see tasks/gradients.py)
VECTORIZE = (True, False, "auto")  # the values of `vectorize`
SUPERVISED = {"eval_batch": 1000, "vectorize": "auto"}  # the options of every image/vector classifier
SYNTHETIC = {"eval_batch": 1000, "n_train": 1000, "n_test": 250, "dim": 20}


@dataclass(frozen=True)
class TaskInfo:
    name: str
    options: dict[str, Any]  # option -> default
    metrics: tuple[str, ...] = ("test_loss", "test_acc")  # what each evaluation records of the averaged model
    # small builds the generic tests run on every task (tests/test_tasks.py): `bench run` settings, each of
    # nodes, batch_size, data and task_options optional (3 workers, batch 4, data shuffle, the defaults)
    examples: tuple[dict[str, Any], ...] = ({},)
    # what a cluster job of one run asks (workflow/rules/common.smk): memory (MB), runtime of ONE run (minutes)
    # when no plan says better, GPUs, and CPUs of a job of one process
    resources: dict[str, int] = field(default_factory=lambda: dict(RESOURCES))


RESOURCES = dict(mem_mb=4000, runtime=60, gpus=0, cpus=1)  # a small task's: a CPU core, an hour at most
TASKS: Registry[TaskInfo] = Registry("task")
TASKS.retire("consensus", "is not a training task: the consensus problem runs with `bench consensus` "
             "(and Choco's γ is tuned on it with `bench tune-gamma`)")


def _add(name: str, options: dict[str, Any], metrics: tuple[str, ...] = ("test_loss", "test_acc"),
         examples: tuple[dict[str, Any], ...] = ({},), resources: dict[str, int] | None = None) -> None:
    TASKS.register(name)(TaskInfo(name, options, metrics, examples, {**RESOURCES, **(resources or {})}))


SMALL_MNIST1D = ({"task_options": {"n_train": 200, "n_test": 100}},)


# in the order bench.tasks registers them (how `known: ...` lists them)
_add("wikitext2-lstm", {"emb": 650, "hidden": 650, "num_layers": 3, "dropout": 0.4, "tie_weights": True, "bptt": 30,
                        "eval_batch": 10, "train_eval_tokens": 20000, "vectorize": "auto"},
     ("test_loss", "test_acc", "test_ppl"),
     ({"data": "split", "task_options": {"emb": 16, "hidden": 16, "num_layers": 2, "bptt": 5}},),
     resources=dict(mem_mb=32000, runtime=24 * 60, gpus=1, cpus=8))
_add("mnist1d-mlp", {**SUPERVISED, "n_train": 4000, "n_test": 1000, "hidden": (100, 100)}, examples=SMALL_MNIST1D)
_add("mnist1d-cnn", {**SUPERVISED, "n_train": 4000, "n_test": 1000, "channels": 25}, examples=SMALL_MNIST1D)
_add("digits-mlp", {**SUPERVISED, "hidden": (64,)})
_add("cifar10-resnet20", dict(SUPERVISED), resources=dict(mem_mb=16000, runtime=24 * 60, gpus=1, cpus=8))
_add("cifar10-resnet8", dict(SUPERVISED), resources=dict(mem_mb=16000, runtime=12 * 60, gpus=1, cpus=8))
_add("imagenet-resnet50", {**SUPERVISED, "size": 224, "eval_batch": 64},
     examples=({"nodes": 2, "batch_size": 2, "task_options": {"size": 32}},),
     resources=dict(mem_mb=64000, runtime=72 * 60, gpus=1, cpus=16))
# convex problems with a known optimum f*: each evaluation also records train_subopt = f(x̄) − f*
_add("lsq", dict(SYNTHETIC), ("test_loss", "test_acc", "train_subopt"))
_add("logreg", dict(SYNTHETIC), ("test_loss", "test_acc", "train_subopt"))


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
