"""`make test` builds each module-scoped fixture once however many workers it runs (tests/conftest.py).

The suite's dearest fixtures (a launch of gloo ranks over every method, `bench perf --quick`) are built once for
their file only if xdist sends the tests that use them to one worker. The grouping rests on the interplay of two
packages: tests/conftest.py marks the tests (xdist_group) and xdist's worker turns the marks into node ids that its
scheduler groups by. pytest 9.2 moved the node id (`item._nodeid` no longer changes it), which silently undid the
grouping under xdist 3.8: every fixture of 100 s and more was built on both workers, a quarter of the suite's time.
This runs a probe suite with the real conftest hook (tests/suite_hooks.py) on two workers and counts the builds.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pytest of its own on two workers

HOOKS = Path(__file__).with_name("suite_hooks.py")  # tests/conftest.py takes its hooks from here

PROBE = '''
import os
from pathlib import Path

import pytest

LOG = Path(os.environ["PROBE_LOG"])


@pytest.fixture(scope="module")
def dear():
    with open(LOG / "builds", "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    return 1


@pytest.mark.parametrize("i", range(8))
def test_uses_the_module_fixture(dear, i):
    with open(LOG / "ran", "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.mark.parametrize("i", range(8))
def test_spreads(i):
    with open(LOG / "spread", "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_a_module_fixture_is_built_once_on_two_workers(tmp_path):
    suite, log = tmp_path / "suite", tmp_path / "log"
    suite.mkdir(), log.mkdir()
    (suite / "conftest.py").write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(HOOKS)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "pytest_collection_modifyitems = module.pytest_collection_modifyitems\n")
    (suite / "test_probe.py").write_text(PROBE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p",
                           "no:cacheprovider", "--rootdir", str(suite), str(suite)], cwd=suite, capture_output=True,
                          text=True, env={**os.environ, "PROBE_LOG": str(log)}, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "16 passed" in proc.stdout, proc.stdout[-2000:]
    builds = (log / "builds").read_text().split()
    assert len(builds) == 1, f"the module fixture was built on {builds}"
    assert set((log / "ran").read_text().split()) == set(builds)  # its 8 tests on the worker that built it
    assert len((log / "spread").read_text().split()) == 8
