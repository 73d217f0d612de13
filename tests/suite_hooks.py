"""The suite's two pytest hooks, in a module that imports nothing heavy: tests/conftest.py takes them from here,
and the probe suites of tests/test_ci_skips.py and tests/test_xdist_groups.py load this very file, so each of
their pytest processes checks the real hook without importing torch, bench and analysis."""
import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # CI (.ci/run sets CHOCO_BENCH_CI=1) has everything a test needs, Chromium included: there a skipped test
    # is a check that did not run, and fails
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("CHOCO_BENCH_CI") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every check must run: {reason}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # tryfirst: xdist's worker turns the xdist_group marks into node ids ("…@group") in its own hook, which
    # otherwise runs before this one and finds no mark (tests/test_xdist_groups.py checks that it took).
    # `make test` spreads the tests over the cores (pytest-xdist, --dist loadgroup). A module-scoped fixture is
    # an expensive thing built once for its file (a launch of ranks, a study end to end): the tests that use
    # one travel together to one worker, so it is built once, not once per worker; all other tests spread.
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs if info is not None else {}
        if any(d and d[-1].scope == "module" for d in defs.values()):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
