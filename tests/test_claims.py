"""The paper's claims as checks (analysis/claims.py): each one holds, fails or is not run on hand-made
summaries whose answer is known, and regress counts a claim lost since the baseline."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.claims import CLAIMS, check_claims
from analysis.regress import compare

SETTING = {"task": "mnist1d-mlp", "topology": "ring", "nodes": 8, "data": "shuffle", "network": "datacenter-10g"}


def runs(algorithm, compressor, accs, status="completed", **extra):
    return [{**SETTING, "algorithm": algorithm, "compressor": compressor, "seed": s, "status": status,
             "final_test_acc": a, "final_local_acc": a - 0.01, **extra} for s, a in enumerate(accs)]


def verdicts(rows, traces=None):
    table = check_claims(pd.DataFrame(rows), traces)
    return dict(zip(table["claim"], table["verdict"])), table


def test_every_claim_is_not_run_on_an_empty_study():
    found, table = verdicts([])
    assert set(found) == {c.name for c in CLAIMS} and set(found.values()) == {"not run"}


def test_choco_within_the_margin_of_allreduce_holds_and_a_wider_gap_fails():
    base = runs("allreduce", "none", [0.70, 0.71, 0.69])
    near = base + runs("choco", "sign", [0.69, 0.70, 0.68]) + runs("choco", "top:0.01", [0.685, 0.69, 0.69])
    found, table = verdicts(near)
    assert found["choco-matches-allreduce"] == "holds"
    assert table["metric"].iloc[0] == "final_local_acc"  # the paper's metric, every run scored every worker
    found, table = verdicts(base + runs("choco", "sign", [0.69] * 3) + runs("choco", "top:0.01", [0.60] * 3))
    assert found["choco-matches-allreduce"] == "fails"
    assert "worst gap 10.00 points (top:0.01)" in table.set_index("claim").loc["choco-matches-allreduce", "measured"]


def test_dcd_and_ecd_must_fail_where_the_paper_has_them_fail():
    base = runs("allreduce", "none", [0.70] * 3)
    collapsed = (base + runs("dcd", "qsgd:4", [0.3] * 3) + runs("dcd", "rand:0.01", [math.nan] * 3, status="diverged")
                 + runs("ecd", "top:0.1", [math.nan] * 3, status="diverged") + runs("ecd", "qsgd:8", [0.55] * 3)
                 + runs("ecd", "qsgd:16", [0.69] * 3))  # 16 bits: ECD may work there, not part of the claim
    found, _ = verdicts(collapsed)
    assert found["dcd-fails-at-low-precision"] == "holds" and found["ecd-fails"] == "holds"
    survived = base + runs("dcd", "qsgd:4", [0.65] * 3) + runs("ecd", "qsgd:8", [0.65] * 3)
    found, table = verdicts(survived)
    assert found["dcd-fails-at-low-precision"] == "fails" and found["ecd-fails"] == "fails"
    # read on the local models (0.01 below the averaged model in these rows)
    assert table.set_index("claim").loc["dcd-fails-at-low-precision", "measured"] == "qsgd:4: 64.0 (all-reduce 69.0)"


def _trace(method, delta, rate, rounds=400, floor=None):
    steps = np.arange(0, rounds + 1, 10)
    err = np.exp(-rate * steps)
    if floor is not None:
        err = np.maximum(err, floor)
    return pd.DataFrame({"method": method, "delta_measured": delta, "step": steps, "rel_error": err})


def test_choco_gossip_linear_and_ordered_by_delta():
    linear = pd.concat([_trace("exact", np.nan, 0.1), _trace("top:0.5", 0.5, 0.05), _trace("top:0.1", 0.1, 0.02),
                        _trace("sign", 0.6, 0.06, floor=1e-6)])  # a floor of its own: the fit stops there
    found, _ = verdicts([], linear)
    assert found["choco-gossip-linear"] == "holds"
    misordered = pd.concat([_trace("top:0.5", 0.5, 0.01), _trace("top:0.1", 0.1, 0.02), _trace("top:0.01", 0.01, 0.05)])
    assert verdicts([], misordered)[0]["choco-gossip-linear"] == "fails"
    steps = np.arange(0, 401, 10)
    sublinear = pd.DataFrame({"method": "top:0.1", "delta_measured": 0.1, "step": steps,
                              "rel_error": 1 / (1 + steps) ** 2})  # a power law: not a line in log error
    assert verdicts([], sublinear)[0]["choco-gossip-linear"] == "fails"


def test_the_gap_grows_as_the_spectral_gap_shrinks_and_the_torus_leads_at_the_largest_n():
    rows = []
    for topology, n, rho, gap in [("ring", 16, 0.05, 0.02), ("ring", 64, 0.003, 0.08), ("torus", 16, 0.4, 0.01),
                                  ("torus", 64, 0.117, 0.04)]:
        rows += [{**r, "topology": topology, "nodes": n, "spectral_gap": rho, "final_gap": gap}
                 for r in runs("choco", "sign", [0.7 - gap] * 2)]
    assert verdicts(rows)[0]["gap-grows-as-spectral-gap-shrinks"] == "holds"
    flipped = [{**r, "final_gap": 0.1 - r["final_gap"], "final_test_acc": 0.6 + r["final_gap"],
                "final_local_acc": 0.6 + r["final_gap"]} for r in rows]
    assert verdicts(flipped)[0]["gap-grows-as-spectral-gap-shrinks"] == "fails"


def test_sign_choco_saves_bits_at_matched_accuracy():
    rows = runs("choco", "sign", [0.7] * 3, bits_to_target=4e6) + runs("dpsgd", "none", [0.7] * 3, bits_to_target=1.6e8)
    found, table = verdicts(rows)
    assert found["sign-choco-saves-bits"] == "holds"
    assert "median saving 40.0×" in table.set_index("claim").loc["sign-choco-saves-bits", "measured"]
    rows = runs("choco", "sign", [0.7] * 3, bits_to_target=math.inf) + runs("dpsgd", "none", [0.7] * 3,
                                                                            bits_to_target=1.6e8)
    assert verdicts(rows)[0]["sign-choco-saves-bits"] == "fails"  # never reached the target


def test_regress_counts_a_claim_lost_since_the_baseline():
    table = check_claims(pd.DataFrame(runs("allreduce", "none", [0.7] * 3) + runs("choco", "sign", [0.6] * 3)))
    baseline = {"cells": {}, "claims": {"choco-matches-allreduce": "holds", "ecd-fails": "holds"}}
    rows, regressions = compare(baseline, pd.DataFrame(columns=["cell"]), claims=table)
    (line,) = regressions
    assert line.startswith("paper claim choco-matches-allreduce held in the baseline and fails now")
    # a claim the current results cannot test is not a regression
    assert set(rows.loc[rows["cell"] == "(paper claim)", "verdict"]) == {"regression", "ok"}


def test_the_claims_command_writes_its_table_and_the_report_has_it(tmp_path, capsys):
    from analysis import cli
    from analysis.report import build_report
    from analysis_fixtures import make_run

    for seed in range(2):
        make_run(tmp_path / f"ar{seed}", algorithm="allreduce", compressor="none", seed=seed)
        make_run(tmp_path / f"ch{seed}", seed=seed)
    assert cli.main(["claims", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "claims.csv")
    assert table.set_index("claim").loc["choco-matches-allreduce", "verdict"] == "holds"  # identical curves
    assert "| choco-matches-allreduce" in capsys.readouterr().out
    assert "## The paper's claims" in build_report(tmp_path, skipped=[])


def test_the_gap_claim_reads_one_partition_the_iid_one():
    rows = []
    for data, sign in (("shuffle", 1), ("sorted", -1)):  # on sorted data the relation is reversed
        for topology, n, rho, gap in [("ring", 16, 0.05, 0.02), ("ring", 64, 0.003, 0.08), ("torus", 16, 0.4, 0.01)]:
            g = 0.05 + sign * (gap - 0.05)
            rows += [{**r, "data": data, "topology": topology, "nodes": n, "spectral_gap": rho, "final_gap": g}
                     for r in runs("choco", "sign", [0.7 - g] * 2)]
    found, table = verdicts(rows)
    assert found["gap-grows-as-spectral-gap-shrinks"] == "holds"
    assert "over 3 (topology, n) cells" in table.set_index("claim").loc["gap-grows-as-spectral-gap-shrinks", "measured"]
