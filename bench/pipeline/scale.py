"""The study at a scale: `--config scale=gpu` merges the study's `gpu:` block over its CPU settings.

The rule, in full: the scale block merges recursively over the study (mappings key by key; lists and
scalars replace), except for the keys of ``SCALE_OWNED``, which come from the scale block alone and are
never inherited from the CPU settings:
- ``defaults.task_options``: the model and data sizes belong to the task of the scale. A CPU size (a
  2 x 64 LSTM, 400 MNIST-1D samples) can never reach a paper-sized run; what the scale block does not
  state is the paper-sized task's own default.
- ``tune.grid``: a search space is one thing; a CPU grid key would widen the paper-sized search. A scale
  block without a ``tune`` grid means that version is not tuned.
After the merge every task option is checked against the options the task accepts, so an invalid
combination stops the DAG build with one line naming the study and the key.
"""
from __future__ import annotations

import copy
from typing import Any

from ..errors import BenchError

SCALES = ("cpu", "gpu")
SCALE_OWNED = (("defaults", "task_options"), ("tune", "grid"), ("tune", "methods"))


def merge(base: dict, over: dict) -> dict:
    """A copy of ``base`` with ``over`` merged in recursively (as snakemake.utils.update_config)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def sized(config: dict[str, Any], scale: str) -> dict[str, Any]:
    """The study's settings at ``scale``: the CPU settings, or the scale block merged over them by the
    rule above. The scale blocks themselves are not part of the result."""
    if scale not in SCALES:
        raise BenchError(f"scale={scale!r}; allowed: {', '.join(SCALES)}")
    base = copy.deepcopy({k: v for k, v in config.items() if k not in SCALES[1:]})
    block = config.get(scale) if scale != "cpu" else None
    if not block:
        return base
    for path in SCALE_OWNED:
        _drop(base, path)
    out = merge(base, block)
    if "tune" in out and "grid" not in out["tune"]:
        del out["tune"]  # the CPU grid was not inherited and the scale block gives none: not tuned
    return out


def _drop(tree: dict, path: tuple[str, ...]) -> None:
    *parents, leaf = path
    for key in parents:
        tree = tree.get(key)
        if not isinstance(tree, dict):
            return
    tree.pop(leaf, None)


def check_task_options(task: str, options: dict[str, Any], where: str) -> None:
    """One line naming ``where`` (e.g. ``gpu.defaults.task_options``) and the key the task does not accept."""
    from ..tasks import TASKS, task_option_names

    TASKS.get(task)  # an unknown task name is one line listing the known ones
    if not isinstance(options, dict):
        raise BenchError(f"{where}={options!r} must be a mapping of option names to values, e.g. {{hidden: [64, 64]}}")
    allowed = task_option_names(task)
    unknown = sorted(set(options) - set(allowed), key=str)
    if unknown:
        raise BenchError(f"{where}.{unknown[0]} is not an option of task {task!r}; allowed: {', '.join(allowed)}")


def options_source(config: dict[str, Any], scale: str) -> str:
    """Where a study's task options come from at ``scale``, for error messages."""
    return f"{scale}.defaults.task_options" if scale != "cpu" and config.get(scale) else "defaults.task_options"
