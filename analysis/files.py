"""Writing result files so that a reader (or a pipeline job killed mid-write) never sees half of one:
the analysis package's one write-then-rename (it reads what ``bench`` writes and never imports it, so
it keeps this copy of ``bench.files.atomic_write``; the temporary names are the same)."""
from __future__ import annotations

import os
import secrets
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
    try:
        write(str(tmp))
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
    return path


def write_text_atomically(path: Path, text: str) -> Path:
    return write_atomically(path, lambda tmp: Path(tmp).write_text(text))
