"""Tasks (data + model + loss) by registry name: ``make_task("mnist1d-mlp", setup)``.

Every module of this package is imported here, so a task registers by being a module of it: a new one is one
module that defines its class with ``@register`` (its options and their defaults, metrics, examples and a
cluster job's resources beside its data and model), and no list to extend; the helper modules register nothing."""
from ..errors import BenchError
from .base import (COMMON_OPTIONS, RESOURCES, TASKS, Task, TaskSetup, check_option_values, check_vectorize,
                   task_option_names)
from ..registry import import_modules

import_modules(__name__, __path__)  # each module that defines a plugin registers it

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
