"""One rank of a ``--backend dist`` run that bench launched itself (bench/run/dist.py ``spawn``):

    python -m bench.run.rank SETTINGS_FILE OUT

The settings come from the file the launcher wrote, through the loader that checks them
(bench/run/settings_file.py), never from a command line parsed again. Errors as `bench run` gives them:
one line, status 2."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m bench.run.rank SETTINGS_FILE OUT", file=sys.stderr)
        return 2
    from ..errors import BenchError
    from .launch import run
    from .settings_file import load_settings

    try:
        return run(load_settings(args[0]), args[1])
    except BenchError as err:
        print(f"bench: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a path the system refused, as `bench run` says it
        if err.filename is None:
            raise
        print(f"bench: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
