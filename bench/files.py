"""Writing files so that no reader ever sees half of one: the suite's one write-then-rename.

Caches, run directories and tables all write through ``atomic_write``; its temporary names match
``is_temporary`` so that a run can sweep up what a killed writer left behind. Lock files are opened
with ``open_lock`` and paths made of a person's names are checked with ``plain_name`` and ``inside``:
nothing is written through a link or outside its folder.
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Callable

from .errors import BenchError

# .NAME.PID.TOKEN.tmp now; .NAME.tmp-PID and .NAME.tmp were written by earlier versions
_TEMPORARY = re.compile(r"^\..+(\.tmp|\.tmp-\d+)$")


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a temporary file of ``atomic_write`` (or of its earlier versions)."""
    return bool(_TEMPORARY.match(name))


# a new file made here and nowhere else: never an existing file, never through a link
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _temporary(path: Path) -> tuple[Path, int]:
    """A new temporary file beside ``path`` (is_temporary's form), created here, and its descriptor."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        return tmp, os.open(tmp, _NEW_FILE, 0o666)
    except OSError as err:
        err.filename = str(path)  # name the file meant
        raise


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` on a fresh temporary path beside ``path``, flush it to disk, rename it to
    ``path``. On any failure (a full disk, a kill signal turned into an exception) the temporary file
    is removed and ``path`` keeps what it held. The folder must exist. ``tmp`` is created here first
    (exclusively, not through a link), so ``write`` only ever fills a file of its own."""
    path = Path(path)
    tmp, fd = _temporary(path)
    os.close(fd)
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
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
    tmp, fd = _temporary(folder / f"{stem}.json")
    try:
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as err:  # a full disk: one line naming the record meant (bench.cli), nothing of it left
            if err.filename is None:
                err.filename = str(folder / f"{stem}.json")
            raise
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


def open_lock(path: Path) -> int:
    """A descriptor of the lock file at ``path`` (created when missing), to flock. Never another file:
    a symbolic link, a file with other names (a hard link) or anything not a plain file at ``path``
    is refused in one line, so a lock cannot write or truncate anything outside its folder."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP and path.is_symlink():
            raise BenchError(f"lock file {path} is a symbolic link; remove it (a lock must be a plain file)") from None
        raise
    info = os.fstat(fd)
    why = ("is not a plain file" if not stat.S_ISREG(info.st_mode)
           else f"has {info.st_nlink} names (hard links)" if info.st_nlink > 1 else None)
    if why:
        os.close(fd)
        raise BenchError(f"lock file {path} {why}; a lock must be a plain file of its own (remove it)")
    return fd


def plain_name(value: str, what: str) -> str:
    """``value`` if it can name a file inside a folder: not empty, no path separator, not '.' or '..'
    (a name like '../x' would write outside the folder); else one line naming ``what``."""
    if not value or value in (".", "..") or "/" in value or os.sep in value or "\0" in value:
        raise BenchError(f"{what} {value!r} is not a plain file name; allowed: a name without '/', not '.' or '..'")
    return value


def inside(root: Path, path: Path) -> Path:
    """``path`` resolved (links followed), if it lies inside ``root`` (resolved too); else one line."""
    base, resolved = Path(root).resolve(), Path(path).resolve()
    if not resolved.is_relative_to(base):
        raise BenchError(f"{path} resolves to {resolved}, outside {root}; outputs stay inside it")
    return resolved


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]
    return next((word for test, word in kinds if test(mode)), "not a plain file")


def read_regular(path, limit: int | None = None) -> bytes:
    """The bytes of the plain file at ``path``. Opened without waiting and looked at before a byte is read: a
    named pipe, a device or a socket where a file is expected (``file:/path/fifo`` would wait for a writer forever,
    /dev/zero never ends) is an OSError whose strerror says what it is; a folder is IsADirectoryError; a file
    larger than ``limit`` bytes is an OSError (EFBIG). Callers turn these into their one line as for any OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{_kind(info.st_mode)}, not a plain file", str(path))
        if limit is not None and info.st_size > limit:
            raise OSError(errno.EFBIG, f"{info.st_size} bytes, more than the {limit} read here", str(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def read_regular_text(path, limit: int | None = None) -> str:
    """``read_regular`` as UTF-8 text (UnicodeDecodeError as ``Path.read_text``)."""
    return read_regular(path, limit).decode("utf-8")
