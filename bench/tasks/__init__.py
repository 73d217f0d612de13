"""Tasks (data + model + loss) by registry name: ``make_task("mnist1d-mlp", setup)``."""
from . import consensus, language, supervised  # noqa: F401  (registration)
from .base import TASKS, Task, TaskSetup
from ..errors import BenchError

__all__ = ["TASKS", "Task", "TaskSetup", "make_task", "task_option_names"]

# options every task understands
COMMON_OPTIONS = {"vectorize"}  # true | false | auto (measured; see tasks/gradients.py)


def task_option_names(name: str) -> list[str]:
    return sorted(set(TASKS.get(name).default_options) | COMMON_OPTIONS)


def make_task(name: str, setup: TaskSetup) -> Task:
    cls = TASKS.get(name)
    allowed = task_option_names(name)
    unknown = sorted(set(setup.options) - set(allowed))
    if unknown:
        raise BenchError(f"unknown option {unknown[0]!r} for task {name!r}; allowed: {', '.join(allowed)}")
    return cls(setup)
