"""The ``bench`` command line: one module per command, one dispatch, and the one place where an error
becomes a line on stderr and exit status 2.

A command module declares ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``, and
imports what it runs (torch among it) inside ``run``: building the parser needs no torch, nor does ``--help``
but `bench run --help`, which lists the registered algorithms (each its module)."""
from __future__ import annotations

import sys

from ..errors import BenchError, out_of_memory
from . import bisect, bits, compare, consensus, perf, plan, run, status, topology, track, tune_gamma
from .common import Parser

COMMANDS = {module.NAME: module for module in
            (run, topology, tune_gamma, consensus, perf, plan, status, track, bisect, compare, bits)}


def build_parser() -> Parser:
    p = Parser(prog="bench", description="Decentralized SGD with compressed communication: runs and measurements.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, module in COMMANDS.items():
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    command = COMMANDS[args.command]
    try:
        return command.run(args)
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a path the system refused: not writable, a file where a folder must be
        if err.filename is None:
            raise
        print(f"bench: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as err:  # sizes (data, model, dim) beyond this machine, from numpy or torch
        if not out_of_memory(err):
            raise
        reason = next((line for line in str(err).splitlines() if "allocate" in line), type(err).__name__)
        print(f"bench: error: not enough memory for these sizes ({reason.strip()[:200]}); use smaller ones",
              file=sys.stderr)
        return 2
