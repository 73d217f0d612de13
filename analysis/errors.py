"""The analysis' errors for people: each is one line on stderr and exit status 2 at the command line
(analysis/cli.py and each sub-command's main)."""
from __future__ import annotations

import sys
from typing import Callable


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class DamagedFile(Exception):
    """A table a command reads back (summary.csv, tuned.csv) that lacks what it needs: the command says
    so in one line naming the file, exit status 2."""


def one_line(prog: str, run: Callable[[], int], errors: tuple[type[Exception], ...] = (UsageError, DamagedFile)) -> int:
    """``run()``'s status, or 2 with one line on stderr for a user's error: one of ``errors``, or a path the system
    refused (not writable, a file where a folder must be); any other failure is a bug and keeps its traceback."""
    try:
        return run()
    except errors as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
    except OSError as err:
        if err.filename is None:
            raise
        print(f"{prog}: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
    return 2
