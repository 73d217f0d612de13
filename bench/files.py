"""Writing files so that no reader ever sees half of one: the suite's one write-then-rename.

Caches, run directories and tables all write through ``atomic_write``; its temporary names match
``is_temporary`` so that a run can sweep up what a killed writer left behind.
"""
from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Callable

from .errors import BenchError

# .NAME.PID.TOKEN.tmp now; .NAME.tmp-PID and .NAME.tmp were written by earlier versions
_TEMPORARY = re.compile(r"^\..+(\.tmp|\.tmp-\d+)$")


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a temporary file of ``atomic_write`` (or of its earlier versions)."""
    return bool(_TEMPORARY.match(name))


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` on a fresh temporary path beside ``path``, flush it to disk, rename it to
    ``path``. On any failure (a full disk, a kill signal turned into an exception) the temporary file
    is removed and ``path`` keeps what it held. The folder must exist."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # a full disk may only say so here; and a rename must not outrun the data
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno is not None and err.strerror and err.filename2 is None:
            err.filename = str(path)  # name the file meant, not a temporary one now gone
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def remove_temporaries(folder: Path) -> list[str]:
    """Delete the temporary files that killed writers left in ``folder``; their names. Only for a
    folder no one else writes now (a run directory under its lock)."""
    removed = []
    for entry in Path(folder).iterdir():
        if is_temporary(entry.name) and entry.is_file():
            entry.unlink(missing_ok=True)
            removed.append(entry.name)
    return removed


def write_new(folder: Path, stem: str, text: str, only_name: bool = False) -> Path | None:
    """Write ``text`` to folder/stem.json, or stem-1.json, ... whichever does not exist yet: whole (a
    temporary file, flushed, then hard-linked, which fails rather than replace a file) and never over
    another record, even one written at the same moment by another process. ``only_name``: stem.json or
    nothing (None when it exists)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{stem}.json.{os.getpid()}.{secrets.token_hex(4)}.tmp"  # is_temporary's form
    try:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        for i in range(10000):
            path = folder / (f"{stem}.json" if i == 0 else f"{stem}-{i}.json")
            try:
                os.link(tmp, path)
                return path
            except FileExistsError:
                if only_name:
                    return None
                continue
        raise BenchError(f"{folder}: 10000 records named {stem}*; remove some")
    finally:
        tmp.unlink(missing_ok=True)
