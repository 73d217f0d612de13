"""Tasks (data + model + loss) by registry name: ``make_task("mnist1d-mlp", setup)``. Their options, defaults
and the checks of their values are their entries in bench/catalog/tasks.py (no torch), re-exported here."""
from . import language, supervised  # noqa: F401  (registration)
from .base import TASKS, Task, TaskSetup
from ..catalog.tasks import COMMON_OPTIONS, check_option_values, task_option_names
from ..errors import BenchError

__all__ = ["COMMON_OPTIONS", "TASKS", "Task", "TaskSetup", "check_option_values", "make_task",
           "task_option_names"]


def make_task(name: str, setup: TaskSetup) -> Task:
    cls = TASKS.get(name)
    allowed = task_option_names(name)
    unknown = sorted(set(setup.options) - set(allowed))
    if unknown:
        raise BenchError(f"unknown option {unknown[0]!r} for task {name!r}; allowed: {', '.join(allowed)}")
    check_option_values(name, setup.options)
    return cls(setup)
