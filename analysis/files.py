"""Writing result files so that a reader (or a pipeline job killed mid-write) never sees half of one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def write_atomically(path: Path, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``; on any
    failure the temporary file is removed and ``path`` keeps what it held. The folder is created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomically(path: Path, text: str) -> Path:
    return write_atomically(path, lambda tmp: Path(tmp).write_text(text))
