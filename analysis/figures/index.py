"""figures/index.json: each drawn figure's name and the caption it was drawn with, merged into by every
`python -m analysis figures` call (the pipeline draws one figure per job, in parallel) and read by the
report (analysis/report.py, and report_html.report_caption for `snakemake --report`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from analysis.errors import UsageError
from analysis.files import open_lock, read_regular, write_text_atomically


def _index_problem(index) -> str | None:
    """What is wrong with index.json's content, or None: it maps figure names (plain file names: the
    report links and inlines figures/NAME.png) to caption strings."""
    if not isinstance(index, dict):
        return f"a JSON {type(index).__name__}, not a mapping of figure names to captions"
    for name, caption in index.items():
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            return f"figure name {name!r} is not a plain file name"
        if not isinstance(caption, str):
            return f"the caption of {name!r} is a {type(caption).__name__}, not a string"
    return None


def read_index(fig_dir: Path) -> dict[str, str]:
    """figures/index.json (figure name -> caption); empty when there is none. A damaged one is one
    line naming it (UsageError: exit status 2), never a traceback and never silently replaced."""
    path = Path(fig_dir) / "index.json"
    if not path.is_file():
        return {}
    try:
        index = json.loads(read_regular(path))
    except (OSError, ValueError) as err:  # truncated, not JSON, not UTF-8
        why = f"not JSON ({err})" if isinstance(err, ValueError) else (err.strerror or str(err))
    else:
        why = _index_problem(index)
        if why is None:
            return index
    raise UsageError(f"{path} is damaged: {why}; remove it and run `python -m analysis figures` again")


LOCK = ".index.lock"


def check_index_lock(fig_dir: Path) -> None:
    """Refuse, before any figure is drawn, a link or a foreign file where index.json's lock goes (UsageError, one
    line); its target is left as it was. Nothing is created: the lock exists only while the index is merged."""
    path = fig_dir / LOCK
    if os.path.lexists(path):
        os.close(_open_lock(path))


def _open_lock(path: Path) -> int:
    try:
        return open_lock(path)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _take_lock(fig_dir: Path) -> int:
    """figures/.index.lock opened and held. Its holder removes it when done (a study's folder keeps no lock), so a
    waiter that then holds a file no longer there opens the new one instead."""
    import fcntl

    path = fig_dir / LOCK
    while True:
        fd = _open_lock(path)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def update_index(fig_dir: Path, drawn: dict[str, str], attempted: set[str]) -> Path:
    """Merge this call's captions into index.json, keeping figures not attempted now. The pipeline
    draws one figure per job, in parallel, so the read-merge-write holds the index's lock."""
    path = fig_dir / "index.json"
    fig_dir.mkdir(parents=True, exist_ok=True)
    lock = _take_lock(fig_dir)
    try:
        index = {k: v for k, v in read_index(fig_dir).items()
                 if k not in attempted and (fig_dir / f"{k}.png").is_file()}
        index.update(drawn)
        write_text_atomically(path, json.dumps(dict(sorted(index.items())), indent=2, ensure_ascii=False) + "\n")
    finally:
        (fig_dir / LOCK).unlink()  # still held: no other process can be inside
        os.close(lock)
    return path
