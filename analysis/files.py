"""Writing result files so that a reader (or a pipeline job killed mid-write) never sees half of one:
the analysis package's one write-then-rename (it reads what ``bench`` writes and never imports it, so
it keeps this copy of ``bench.files.atomic_write``; the temporary names are the same), and its lock files,
never opened through a link (as ``bench.files.open_lock``)."""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Callable


def write_atomically(path: Path, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, flush it to disk, rename it to ``path``;
    on any failure (a full disk, a kill signal turned into an exception) the temporary file is removed
    and ``path`` keeps what it held. The folder is created. ``tmp`` does not end in ``path``'s suffix:
    a writer that goes by the suffix (``savefig``) must be given the format."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:  # created here first, exclusively and not through a link: ``write`` fills a file of its own
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666))
    except OSError as err:
        err.filename = str(path)
        raise
    try:
        write(str(tmp))
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
    return path


def write_text_atomically(path: Path, text: str) -> Path:
    return write_atomically(path, lambda tmp: Path(tmp).write_text(text))


def open_lock(path: Path) -> int:
    """A descriptor of the lock file at ``path`` (created when missing), to flock; a symbolic link, a
    file with other names (a hard link) or anything not a plain file there is refused (ValueError, one
    line), so a lock never truncates or writes another file."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP and path.is_symlink():
            raise ValueError(f"lock file {path} is a symbolic link; remove it (a lock must be a plain file)") from None
        raise
    info = os.fstat(fd)
    why = ("is not a plain file" if not stat.S_ISREG(info.st_mode)
           else f"has {info.st_nlink} names (hard links)" if info.st_nlink > 1 else None)
    if why:
        os.close(fd)
        raise ValueError(f"lock file {path} {why}; a lock must be a plain file of its own (remove it)")
    return fd


def read_regular(path) -> bytes:
    """The bytes of the plain file at ``path``, looked at before a byte is read (as ``bench.files.read_regular``):
    a named pipe, a device or a socket in a results folder would wait for a writer forever or never end, and is
    an OSError saying what it is instead; a folder is IsADirectoryError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a plain file (a named pipe, a device or a socket)", str(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)
