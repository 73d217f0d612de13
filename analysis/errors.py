"""The analysis' errors for people: each is one line on stderr and exit status 2 at the command line
(analysis/cli.py and each sub-command's main)."""
from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class DamagedFile(Exception):
    """A table a command reads back (summary.csv, tuned.csv) that lacks what it needs: the command says
    so in one line naming the file, exit status 2."""
