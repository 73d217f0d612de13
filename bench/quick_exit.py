"""Ending a process without the interpreter's teardown.

A process that has imported torch spends 0.3-0.7 s on 2 cores, after its last line, tearing its modules down;
a caller waiting on its pipes (a pipeline's job, a test, the launcher of dist ranks) waits that long for
nothing. ``finish`` ends a command-line program once it has returned its status: the exit handlers run
(logging, multiprocessing, temporary folders), the standard streams are flushed, then the process ends at
``os._exit``. Every file bench writes is closed (and renamed into place) before its command returns.
"""
from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe (`bench ... | head`), a closed stream
            pass


def finish(status: int | None) -> NoReturn:
    """Exit with ``status`` (None: 0), as ``sys.exit`` does, after the exit handlers, without the teardown. Any
    other kind of status (a message) takes ``sys.exit``'s own path."""
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        sys.exit(status)
    atexit._run_exitfuncs()
    _flush()
    os._exit(status or 0)
