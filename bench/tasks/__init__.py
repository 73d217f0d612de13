"""Tasks (data + model + loss) by registry name: ``make_task("mnist1d-mlp", setup)``."""
import math

from . import language, supervised  # noqa: F401  (registration)
from .base import TASKS, Task, TaskSetup
from ..errors import BenchError

__all__ = ["TASKS", "Task", "TaskSetup", "check_option_values", "make_task", "task_option_names"]

# options every task understands
TASKS.retire("consensus", "is not a training task: the consensus problem runs with `bench consensus` "
             "(and Choco's γ is tuned on it with `bench tune-gamma`)")

COMMON_OPTIONS = {"vectorize"}  # true | false | auto (measured; see tasks/gradients.py)


def task_option_names(name: str) -> list[str]:
    return sorted(set(TASKS.get(name).default_options) | COMMON_OPTIONS)


def check_option_values(name: str, options: dict) -> None:
    """Each option of the type of its default: sizes are whole numbers >= 1 (a list of them for layer widths),
    flags true or false, rates finite numbers; one line naming the option otherwise (the tasks would fail
    deep inside, e.g. ``range(0, n, 0)`` for ``eval_batch=0``). Ranges beyond these the tasks check."""
    defaults = TASKS.get(name).default_options
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


def make_task(name: str, setup: TaskSetup) -> Task:
    cls = TASKS.get(name)
    allowed = task_option_names(name)
    unknown = sorted(set(setup.options) - set(allowed))
    if unknown:
        raise BenchError(f"unknown option {unknown[0]!r} for task {name!r}; allowed: {', '.join(allowed)}")
    check_option_values(name, setup.options)
    return cls(setup)
