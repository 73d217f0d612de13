"""One rank of a ``--backend dist`` run that bench launched itself (bench/run/dist.py ``spawn``):

    python -m bench.run.rank SETTINGS_FILE OUT

The settings come from the file the launcher wrote, through the loader that checks them
(bench/run/settings_file.py), never from a command line parsed again. Errors as `bench run` gives them:
one line, status 2."""
from __future__ import annotations

import os
import sys


def forked(env: dict[str, str], settings: str, out: str) -> None:
    """A rank forked from the fork server (bench/run/dist.py ``launch_forked``): the launcher's environment
    with this rank's rendezvous variables, set before anything reads them (the server's own dates from when
    it started), then ``main``; its status is the process's exit status."""
    os.environ.clear()
    os.environ.update(env)
    _name_process(f"bench-rank-{env['RANK']}")
    import torch

    torch.set_num_threads(int(env["OMP_NUM_THREADS"]))  # before the first operation starts a thread pool
    sys.exit(main([settings, out]))


def _name_process(name: str) -> None:
    """The name ``ps`` and /proc/PID/comm show (Linux; elsewhere nothing): a forked rank would otherwise
    carry the fork server's."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


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
