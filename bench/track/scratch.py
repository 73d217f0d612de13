"""The temporary folders of `bench track` and `bench bisect` (choco-track-, choco-track-tree-, choco-bisect-),
removed whatever happens: a ``finally`` removes them on an exception, ``stopping_cleanly`` makes SIGTERM and
SIGINT exceptions for the command's lifetime (Python's default SIGTERM ends the process without running any
``finally``), and a folder's name holds its owner's pid, so that the next command removes what a SIGKILL left:
folders of this user whose owner is no longer running (``sweep``)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

_OURS = re.compile(r"^choco-(?:track|track-tree|bisect)-(\d+)-")  # the prefix, the owner's pid, mkdtemp's part


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep(root: Path | None = None) -> list[str]:
    """Remove the folders under ``root`` (the temporary folder) that killed commands of this user left; their
    names. Another user's folders, links, and folders named otherwise (older versions') are left alone."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _OURS.match(entry.name)
        try:
            info = entry.lstat()
        except OSError:
            continue
        if not match or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and not _running(pid):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    return removed


def scratch_dir(prefix: str) -> Path:
    """A new temporary folder ``<prefix><pid>-XXXXXXXX`` (the command sweeps at its start)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def _stop(signum, _frame):
    raise SystemExit(128 + signum)  # the shell's status of a process ended by that signal


@contextmanager
def stopping_cleanly():
    """SIGTERM and SIGINT raise SystemExit while inside: every ``finally`` runs (folders removed, children
    killed), then the process ends with 128 + the signal's number and no traceback."""
    if threading.current_thread() is not threading.main_thread():  # signals can only be set there
        yield
        return
    before = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def run_child(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True), but a child left by an exception here (SIGTERM made
    one) gets SIGTERM first, so that it removes its own folders too; SIGKILL after 30 s."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw) as proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
