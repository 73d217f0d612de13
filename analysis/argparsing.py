"""The argument parser of every `python -m analysis` command: a bad argument is one line (UsageError),
never argparse's usage text and exit status."""
from __future__ import annotations

import argparse
import sys

from analysis.errors import UsageError


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage + message; people need the one line
        raise UsageError(message)

    def parse_known_args(self, args=None, namespace=None):
        # argparse drops "--" from an option's value: `--target-acc=--` became an empty list no type check saw
        for word in sys.argv[1:] if args is None else args:
            flag, eq, value = word.partition("=")
            if word.startswith("-") and eq and value == "--":
                self.error(f"argument {flag}: '--' is not a value")
        return super().parse_known_args(args, namespace)
