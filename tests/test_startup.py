"""bench/startup.py: an entry point holds the cyclic collector while its modules import and releases it before
its work, with what the imports left alive frozen; a process that never held it is left as its caller set it.
Each case in a child interpreter: the collector's state is the whole process's."""
import json
import subprocess
import sys

import pytest


def child(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_hold_then_release_freezes_what_is_alive_and_collects_again():
    seen = child("""
import gc, json
from bench.startup import hold, release
hold(); held = gc.isenabled()
junk = [[] for _ in range(1000)]
release()
print(json.dumps({"held": held, "after": gc.isenabled(), "frozen": gc.get_freeze_count()}))
""")
    assert seen["held"] is False and seen["after"] is True and seen["frozen"] >= 1000


def test_release_without_a_hold_leaves_the_callers_collector_alone():
    seen = child("""
import gc, json
from bench.startup import hold, release
gc.disable(); hold(); release()  # the caller turned it off: hold takes nothing, release gives nothing back
off = gc.isenabled()
gc.enable(); release()
print(json.dumps({"off": off, "on": gc.isenabled(), "frozen": gc.get_freeze_count()}))
""")
    assert seen == {"off": False, "on": True, "frozen": 0}


# the state of the collector where bench's own code starts: at the run's loop for `bench run`, at the command for
# the others (bench topology here); the hold itself is bench/__main__.py's
WATCH = """
import gc, json, runpy, sys
watched = {}
def watch(where, module, name):
    def wrapped(*a, **k):
        watched.setdefault(where, {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                                   "torch": "torch" in sys.modules})
        return original(*a, **k)
    original = getattr(module, name)
    setattr(module, name, wrapped)
import bench.cli.topology, bench.run.runner, bench.run.setup
watch("build", bench.run.setup, "build")
watch("loop", bench.run.runner.Loop, "run")
watch("command", bench.cli.topology, "run")
import atexit
atexit.register(lambda: print(json.dumps(watched)))
sys.argv = ["bench", *sys.argv[1:]]
runpy.run_module("bench", run_name="__main__")
"""


@pytest.mark.slow  # a bench command in a child process: `make test` runs it, test-fast does not
@pytest.mark.parametrize("argv, where", [
    (["run", "--set", "task=lsq", "--set", "nodes=4", "--set", "epochs=1", "--quiet", "--out", "{tmp}"], "loop"),
    (["topology", "--topology", "ring", "--nodes", "4"], "command")])
def test_a_bench_command_runs_with_the_collector_released_after_its_imports(tmp_path, argv, where):
    seen = child(WATCH, *[a.format(tmp=tmp_path / "run") for a in argv])
    assert seen[where]["enabled"] is True and seen[where]["frozen"] > 10_000
    if where == "loop":  # torch and the training code imported and the run built with the collector held
        assert seen["build"]["enabled"] is False and seen["build"]["torch"] is True
