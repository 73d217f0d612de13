"""In CI (CHOCO_BENCH_CI=1, set by .ci/run) a skipped test fails: every check there must run, the browser
test included. Elsewhere a skip stays a skip."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess:
    # the suite's real hook (tests/suite_hooks.py, which tests/conftest.py imports), without the rest of conftest
    shutil.copy(Path(__file__).with_name("suite_hooks.py"), tmp_path / "suite_hooks.py")
    (tmp_path / "conftest.py").write_text("from suite_hooks import pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_probe.py").write_text("import pytest\n\ndef test_skips():\n    pytest.skip('no tool here')\n")
    env = {k: v for k, v in os.environ.items() if k != "CHOCO_BENCH_CI"}
    if ci:
        env["CHOCO_BENCH_CI"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_a_skip_fails_in_ci_and_stays_a_skip_elsewhere(tmp_path):
    ci = _run(tmp_path, ci=True)
    assert ci.returncode == 1 and "1 failed" in ci.stdout and "skipped in CI" in ci.stdout
    local = _run(tmp_path, ci=False)
    assert local.returncode == 0 and "1 skipped" in local.stdout


def test_ci_installs_chromium_and_marks_itself():
    script = (Path(__file__).parents[1] / ".ci" / "run").read_text()
    assert "apt-get install" in script and "chromium" in script and "export CHOCO_BENCH_CI=1" in script
