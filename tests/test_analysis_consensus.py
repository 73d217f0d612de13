"""The consensus summary reads traces files and finds interpolated crossings."""
import math

import pandas as pd
import pytest

from analysis.consensus import first_crossing, summarize


def test_first_crossing_interpolates_in_log_error():
    # error 1e-2 at step 10, 1e-6 at step 20: 1e-4 lies halfway in log space
    assert first_crossing([0, 10, 20], [1.0, 1e-2, 1e-6], 1e-4) == pytest.approx(15.0)
    assert first_crossing([0, 10], [1.0, 1e-3], 1e-4) == math.inf
    assert first_crossing([5, 10], [1e-5, 1e-6], 1e-4) == 5.0


def test_summary_statuses_reached_censored_diverged():
    rows = []
    for method, errors, diverged in [("a", [1, 1e-3, 1e-5], False), ("b", [1, 0.5, 0.1], False),
                                     ("c", [1, 10, 2e3], True)]:
        for step, err in zip([0, 10, 20], errors):
            rows.append({"method": method, "gamma": 0.5, "delta_measured": 0.1, "diverged": diverged, "step": step,
                         "rel_error": err, "bits_per_worker": step * 1e6})
    table = summarize(pd.DataFrame(rows)).set_index("method")
    assert list(table["status"]) == ["reached", "censored", "diverged"]
    assert table.loc["a", "rounds_to_0.0001"] == pytest.approx(15.0)
    assert table.loc["a", "mbit_to_0.0001"] == pytest.approx(15.0)
    assert math.isinf(table.loc["b", "rounds_to_0.0001"])
    assert table.loc["a", "mbit_per_round"] == pytest.approx(1.0)
