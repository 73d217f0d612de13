"""Tasks (data + model + loss) by registry name: ``make_task("mnist1d-mlp", setup)``.

Every module of this package is imported here, so a task registers by being a module of it: a new one is one
module that defines its class with ``@register`` (its options and their defaults, metrics, examples and a
cluster job's resources beside its data and model), and no list to extend; the helper modules register nothing."""
import importlib
import pkgutil

from ..errors import BenchError
from .base import (COMMON_OPTIONS, RESOURCES, TASKS, Task, TaskSetup, check_option_values, check_vectorize,
                   task_option_names)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")  # importing registers the tasks it defines

__all__ = ["COMMON_OPTIONS", "RESOURCES", "TASKS", "Task", "TaskSetup", "check_option_values", "check_vectorize",
           "make_task", "task_option_names"]


def make_task(name: str, setup: TaskSetup) -> Task:
    cls = TASKS.get(name)
    allowed = task_option_names(name)
    unknown = sorted(set(setup.options) - set(allowed))
    if unknown:
        raise BenchError(f"unknown option {unknown[0]!r} for task {name!r}; allowed: {', '.join(allowed)}")
    check_option_values(name, setup.options)
    return cls(setup)
