"""The spectral study's claim that the gap to all-reduce follows the effective number of neighbours n_W
(Vogels et al. 2022) better than the spectral gap ρ (analysis/claims/topology.py), on hand-made summaries
whose answer is known: gaps ordered by n_W hold, gaps ordered by ρ fail, graphs on which ρ and n_W agree
cannot tell them apart (incomplete), and a summary written before the n_eff column says so."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.claims import check_claims
from analysis.claims.stats import bootstrap_correlation_difference, spearman
from analysis.claims.topology import disagreeing_pairs
from analysis.summary import LATER_COLUMNS, SUMMARY_COLUMNS, read_summary

NAME = "gap-follows-effective-neighbours"
SETTING = {"task": "mnist1d-mlp", "nodes": 16, "data": "shuffle", "network": "datacenter-10g"}
# ρ and n_W(0.9) of graphs at n = 16 as `bench topology` reports them
GRAPHS = {"complete": (1.0, 16.0), "base:3": (1.0, 12.31), "base:1": (1.0, 7.8), "ring": (0.051, 6.6),
          "star": (0.062, 2.32), "torus": (0.4, 12.23), "random-regular:6": (0.394, 13.79),
          "exponential": (0.5, 14.35), "erdos-renyi:0.2": (0.108, 8.65)}
JITTER = (0.0, 0.2, -0.2)  # the same seed offsets (points) in every cell


def rows(gap_of, methods=(("choco", "sign"), ("dpsgd", "none")), graphs=GRAPHS, with_n_eff=True):
    """All-reduce at 70 % and each method on each graph at 70 % − gap_of(ρ, n_W) points, 3 seeds."""
    out = [{**SETTING, "algorithm": "allreduce", "compressor": "none", "topology": "complete", "seed": s,
            "status": "completed", "final_test_acc": 0.70, "final_local_acc": 0.70} for s in range(3)]
    for algorithm, comp in methods:
        for topology, (rho, n_w) in graphs.items():
            for s, j in enumerate(JITTER):
                acc = 0.70 - (gap_of(rho, n_w) + j) / 100
                row = {**SETTING, "algorithm": algorithm, "compressor": comp, "topology": topology, "seed": s,
                       "status": "completed", "spectral_gap": rho, "final_test_acc": acc, "final_local_acc": acc}
                out.append({**row, "n_eff": n_w} if with_n_eff else row)
    return out


def verdict(table_rows):
    table = check_claims(pd.DataFrame(table_rows)).set_index("claim")
    return table.loc[NAME, "verdict"], table.loc[NAME]


def test_a_gap_set_by_the_effective_neighbours_holds_and_states_both_correlations():
    found, row = verdict(rows(lambda rho, n_w: 40.0 / n_w))
    assert found == "holds", row["measured"]
    assert "Spearman(n_W, gap) = -1.00" in row["measured"] and "over 9 graphs" in row["measured"]
    assert "base:1 and base:3" in row["measured"]  # the equal-ρ pairs that tell the two apart


def test_a_gap_set_by_the_spectral_gap_fails():
    found, row = verdict(rows(lambda rho, n_w: -2.0 * math.log(rho) + 0.01 * n_w))
    assert found == "fails", row["measured"]


def test_graphs_on_which_rho_and_n_eff_agree_cannot_decide():
    agree = {k: GRAPHS[k] for k in ("ring", "erdos-renyi:0.2", "torus", "exponential", "complete")}
    found, row = verdict(rows(lambda rho, n_w: 40.0 / n_w, graphs=agree))
    assert found == "incomplete" and "two graphs of equal ρ" in row["missing"]


def test_too_few_graphs_or_seeds_are_named():
    few = {k: GRAPHS[k] for k in ("complete", "base:1", "ring", "star")}
    found, row = verdict(rows(lambda rho, n_w: 40.0 / n_w, graphs=few))
    assert found == "incomplete" and "≥ 5 graphs of choco/sign (have 4)" in row["missing"]
    short = [r for r in rows(lambda rho, n_w: 40.0 / n_w) if not (r["topology"] == "star" and r["seed"] == 2)]
    found, row = verdict(short)
    assert found == "incomplete" and "star" in row["missing"]


def test_a_summary_from_before_the_n_eff_column_still_reads_and_the_claim_says_what_it_lacks(tmp_path):
    found, row = verdict(rows(lambda rho, n_w: 40.0 / n_w, with_n_eff=False))
    assert found == "incomplete" and "n_eff" in row["missing"]
    assert LATER_COLUMNS <= set(SUMMARY_COLUMNS)
    old = pd.DataFrame([{c: math.nan for c in SUMMARY_COLUMNS if c not in LATER_COLUMNS}])
    old["cell"], old["run_id"], old["status"], old["nodes"], old["seed"] = "c", "r", "completed", 16, 0
    path = tmp_path / "summary.csv"
    old.to_csv(path, index=False)
    assert "n_eff" not in read_summary(path)


def test_the_correlation_difference_and_its_interval():
    x = np.arange(8.0)
    d, low, high = bootstrap_correlation_difference(x, x, -x)
    assert (d, low, high) == (0.0, 0.0, 0.0)  # the same predictor twice: no difference in any resample
    noisy = x + np.array([3, -3, 2, -2, 1, -1, 0, 0])
    d, low, high = bootstrap_correlation_difference(noisy, x, -x)
    assert d == pytest.approx(spearman(noisy, -x) + 1.0) and low <= d <= high and d > 0
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="at least 3 points"):
        bootstrap_correlation_difference([1, 2], [1, 2], [1, 2])


def test_equal_rho_pairs_need_different_n_eff():
    assert disagreeing_pairs({"a": (1.0, 16.0), "b": (1.0, 7.8), "c": (0.05, 6.6)}) == [("a", "b")]
    assert disagreeing_pairs({"a": (1.0, 16.0), "b": (1.0, 12.0), "c": (0.5, 6.0)}) == []
