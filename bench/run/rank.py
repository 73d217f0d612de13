"""One rank of a ``--backend dist`` run, from a command line:

    python -m bench.run.rank SETTINGS_FILE OUT

``bench run --backend dist`` forks its ranks instead (bench/run/launch.py ``forked_rank``); both run
``run_rank``: the settings come from the file the launcher wrote, through the loader that checks them
(bench/run/settings_file.py), never from a command line parsed again. Errors as `bench run` gives them:
one line, status 2."""
from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m bench.run.rank SETTINGS_FILE OUT", file=sys.stderr)
        return 2
    from ..startup import hold

    hold()  # while the training code imports; the run releases it as it starts (bench/startup.py)
    from .dist import CHILD_FLAG, stop_with_parent
    from .launch import run_rank

    if os.environ.get(CHILD_FLAG):  # started by bench's own launcher, in a session of its own: stop with it
        stop_with_parent(signal.SIGTERM)

    return run_rank(*args)


if __name__ == "__main__":
    sys.exit(main())
