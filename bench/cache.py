"""The suite's cache: where it lives (computed here only) and how parallel jobs update one file of it.

The tuned γ values (``gamma.json``) and the generated data sets (``mnist1d/``) live here (a run's
gradient path does not: it follows a rule, see tasks/gradients.py). Pipeline jobs run in parallel, so
a file is changed only under its lock (an flock on ``.NAME.lock`` beside it) and written whole through ``bench.files``.
"""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import BenchError
from .files import atomic_write_text, open_lock, read_regular

ENV = "CHOCO_BENCH_CACHE"  # moves every cache of the suite (tests point it at a temporary directory)
DEFAULT = "~/.cache/choco-bench"


def cache_dir() -> Path:
    """The cache folder: ``$CHOCO_BENCH_CACHE``, else ``~/.cache/choco-bench``."""
    return Path(os.environ.get(ENV, DEFAULT)).expanduser()


def cache_path(name: str) -> Path:
    """A file or folder of the cache (not created)."""
    return cache_dir() / name


def lock_path(path: Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock of ``path`` while the block runs: blocks that hold one path's lock run one at a
    time, across processes. The folder is created. An OS lock: the kernel releases it when its holder
    exits or is killed; the lock file stays (removing it would let two holders in at once). Fork no
    child inside the block: flock locks belong to the open file, so the child would hold it too. A link
    where the lock should be is refused (open_lock)."""
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = open_lock(lock)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def read_json(path: Path) -> dict:
    """The JSON mapping at ``path``; empty when there is no file. Anything else is one line naming it."""
    try:
        data = json.loads(read_regular(path))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise BenchError(f"cache {path} is damaged ({err}); remove it") from None
    if not isinstance(data, dict):
        raise BenchError(f"cache {path} is damaged (a JSON {type(data).__name__}, not a mapping); remove it")
    return data


def update_json(path: Path, key: str, value: Any, *, read: Callable[[Path], dict] = read_json,
                keep: Callable[[Any], bool] | None = None) -> Any:
    """Set ``key`` of the JSON mapping at ``path`` to ``value``: read (with ``read``, which names a
    damaged file), change and write the whole file atomically under its lock, so that parallel jobs
    keep each other's entries. An entry already there that ``keep`` accepts (written by a parallel
    job since the caller looked) is kept instead. Returns the value now stored."""
    path = Path(path)
    with locked(path):
        data = read(path)
        if keep is None or key not in data or not keep(data[key]):
            data[key] = value
            atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))
        return data[key]
