"""bench/quick_exit.py: a command ends without the interpreter's teardown, but nothing it promised is lost: the
exit handlers run, buffered output reaches the pipe, and the status is the one returned."""
import subprocess
import sys

import pytest

FINISH = """
import atexit, sys
from bench.quick_exit import finish
atexit.register(lambda: open(sys.argv[1], "w").write("handler ran"))
sys.stdout.write("buffered, no newline")
finish(eval(sys.argv[2]))
"""


@pytest.mark.parametrize("status, code, err", [(3, 3, ""), (0, 0, ""), (None, 0, ""),
                                               ("bench: error: x", 1, "bench: error: x")])  # a message: as sys.exit
def test_finish_runs_the_exit_handlers_flushes_and_exits_with_the_status(tmp_path, status, code, err):
    done = subprocess.run([sys.executable, "-c", FINISH, str(tmp_path / "mark"), repr(status)],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (code, "buffered, no newline", err)
    assert (tmp_path / "mark").read_text() == "handler ran"
