"""One rank of a ``--backend dist`` run that ``bench run`` launched itself (bench/run/dist.py ``spawn``):

    python -m bench.run.rank SETTINGS_FILE OUT

The settings come from the file the launcher wrote, through the loader that checks them
(bench/run/settings_file.py), never from a command line parsed again. Errors as `bench run` gives them:
one line, status 2. The process is named ``bench-rank-N`` (``ps``, /proc/PID/comm)."""
from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m bench.run.rank SETTINGS_FILE OUT", file=sys.stderr)
        return 2
    from .dist import CHILD_FLAG, prctl, stop_with_parent
    from .launch import run_rank

    if os.environ.get(CHILD_FLAG):  # started by bench's own launcher, in a session of its own: stop with it
        stop_with_parent(signal.SIGTERM)
        prctl(15, f"bench-rank-{os.environ['RANK']}".encode()[:15])  # PR_SET_NAME: the name ps shows

    return run_rank(*args)


if __name__ == "__main__":
    from ..quick_exit import finish

    finish(main())  # the exit handlers, then no teardown of torch (bench/quick_exit.py)
