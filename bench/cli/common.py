"""What the command modules share: the parser that refuses in one line, and the argument types of the
commands whose flags reach no `bench.run.config.validate()` (a `bench run` setting is checked there)."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from ..limits import DEVICES, MAX_NODES, MAX_SEED, is_device


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, status 2, no usage dump
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)

    def parse_known_args(self, args=None, namespace=None):
        # argparse drops "--" from an option's value: `--grid=--` became an empty list no type check saw
        for word in sys.argv[1:] if args is None else args:
            flag, eq, value = word.partition("=")
            if word.startswith("-") and eq and value == "--":
                self.error(f"argument {flag}: '--' is not a value")
        return super().parse_known_args(args, namespace)


def int_between(low: int, high: int | None = None, why: str = ""):
    """An argparse type: an integer >= low (and <= high when given; `why` explains that bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be >= {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{value} must be <= {high}{why}")
        return value

    return parse


positive_int = int_between(1)
non_negative_int = int_between(0)
node_count = int_between(1, MAX_NODES, " (W is a dense n x n matrix)")
seed = int_between(0, MAX_SEED)


def device(*extra: str):
    """An argparse type: a torch device string the suite runs on, or one of ``extra`` (e.g. auto)."""

    def parse(text: str) -> str:
        if text in extra or is_device(text):
            return text
        raise argparse.ArgumentTypeError(f"{text!r}; allowed: {', '.join([*extra, DEVICES])}")

    return parse


def output_dir(text: str) -> str:
    """A directory to write into (made when missing): refused when it or a folder above it is a file,
    or when it cannot be written, before anything runs."""
    if not text.strip():  # Path("") is the working folder: `--out ""` wrote there, or (consensus) nowhere
        raise argparse.ArgumentTypeError(f"{text!r} is an empty path; give a directory")
    path = Path(text)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:
        return text
    if not existing.is_dir():
        where = f"{text!r} is" if existing == path else f"{text!r}: {existing} is"
        raise argparse.ArgumentTypeError(f"{where} a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: {existing} is not writable")
    return text


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value
