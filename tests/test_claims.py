"""The paper's claims as checks (analysis/claims/): each needs its evidence. On hand-made summaries whose
answer is known, a claim holds or fails only when every cell and seed it names ran; each vacuous case a
reviewer found (one compressor for "every compressor", diverged seeds left out, a levelled-off trace fitted
away, no torus, an insignificant Spearman, two metrics in one claim) is planted and answered incomplete,
fails or inconclusive."""
import math

import numpy as np
import pandas as pd
import pytest

from analysis.claims import CLAIMS, check_claims, claims_markdown
from analysis.claims.stats import bootstrap_mean, spearman_test
from analysis.claims.table1 import DCD_FAILS, ECD_FAILS, TABLE1
from analysis.regress import baseline_problem, compare

SETTING = {"task": "mnist1d-mlp", "topology": "ring", "nodes": 8, "data": "shuffle", "network": "datacenter-10g"}
SEEDS = (0, 1, 2)


def runs(algorithm, compressor, accs, status="completed", **extra):
    """One row per seed; ``accs`` per seed (a float for all), NaN accuracy where ``status`` is diverged."""
    accs = [accs] * len(SEEDS) if isinstance(accs, float) else accs
    statuses = [status] * len(accs) if isinstance(status, str) else status
    out = []
    for s, (a, st) in enumerate(zip(accs, statuses)):
        a = math.nan if st == "diverged" else a
        out.append({**SETTING, "algorithm": algorithm, "compressor": compressor, "seed": s, "status": st,
                    "final_test_acc": a + 0.01, "final_local_acc": a, **extra})
    return out


def verdicts(rows, traces=None, **kw):
    table = check_claims(pd.DataFrame(rows), traces, **kw)
    return dict(zip(table["claim"], table["verdict"])), table.set_index("claim")


def allreduce(acc=0.70):
    return runs("allreduce", "none", [acc, acc + 0.004, acc - 0.004])


def choco_everywhere(gap_points=0.5):
    rows = allreduce()
    for i, comp in enumerate(TABLE1):
        rows += runs("choco", comp, [0.70 - gap_points / 100 + 0.001 * k for k in (0, 1, -1)])
    return rows


# -- the statistics the verdicts state -------------------------------------------------------------------------
def test_bootstrap_interval_holds_the_mean_and_shrinks_with_agreement():
    mean, low, high = bootstrap_mean([1.0, 2.0, 3.0])
    assert mean == 2.0 and low < 2.0 < high and low >= 1.0 and high <= 3.0
    assert bootstrap_mean([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    assert bootstrap_mean([1.0, math.inf])[0] == math.inf


def test_spearman_permutation_test_is_exact_on_few_points():
    rho, p = spearman_test([1, 2, 3, 4], [10, 20, 30, 40], "greater")
    assert rho == pytest.approx(1.0) and p == pytest.approx(1 / 24)  # one ordering of 24 is as extreme
    rho, p = spearman_test([1, 2, 3, 4], [10, 20, 30, 40], "less")
    assert p == pytest.approx(1.0)
    rho, p = spearman_test([1, 2, 3, 4], [20, 10, 30, 40], "greater")  # ρ = 0.8: 4 orderings of 24 reach it
    assert rho == pytest.approx(0.8) and p == pytest.approx(4 / 24)


# -- evidence ------------------------------------------------------------------------------------------------------
def test_every_claim_is_incomplete_on_an_empty_study_and_says_what_it_needs():
    found, table = verdicts([])
    assert set(found) == {c.name for c in CLAIMS} and set(found.values()) == {"incomplete"}
    assert all(table["missing"].str.len() > 0) and all(table["needs"].str.len() > 0)


def test_choco_within_the_margin_of_allreduce_holds_with_every_compressor_and_an_interval():
    found, table = verdicts(choco_everywhere(gap_points=0.5))
    assert found["choco-matches-allreduce"] == "holds"
    measured = table.loc["choco-matches-allreduce", "measured"]
    assert "95 % bootstrap interval" in measured and "3 seeds" in measured and "11 of 11 compressors" in measured
    assert table.loc["choco-matches-allreduce", "reads"].startswith("final accuracy of the local models")


def test_a_claim_about_every_compressor_is_incomplete_with_one():
    rows = allreduce() + runs("choco", "sign", 0.699)
    found, table = verdicts(rows)
    assert found["choco-matches-allreduce"] == "incomplete"
    missing = table.loc["choco-matches-allreduce", "missing"]
    assert "choco/qsgd:16: no finished runs" in missing and "choco/sign" not in missing


def test_one_seed_is_not_evidence_for_a_comparison():
    rows = [r for r in choco_everywhere() if r["seed"] == 0]
    found, table = verdicts(rows)
    assert found["choco-matches-allreduce"] == "incomplete"
    assert "all-reduce: 1 of 3 seeds" in table.loc["choco-matches-allreduce", "missing"]
    assert verdicts(rows, min_seeds=2)[0]["choco-matches-allreduce"] == "incomplete"
    with pytest.raises(ValueError, match="at least 2 seeds"):
        check_claims(pd.DataFrame(rows), min_seeds=1)


def test_a_failed_seed_is_missing_and_says_so():
    rows = choco_everywhere()
    rows = [{**r, "status": "failed"} if r["algorithm"] == "choco" and r["compressor"] == "sign" and r["seed"] == 2
            else r for r in rows]
    found, table = verdicts(rows)
    assert found["choco-matches-allreduce"] == "incomplete"
    assert "choco/sign: 2 of 3 seeds paired with the reference (seeds 0, 1) (1 failed)" in \
        table.loc["choco-matches-allreduce", "missing"]


def test_diverged_seeds_count_where_a_claim_says_a_method_trains():
    rows = [r for r in choco_everywhere() if not (r["algorithm"] == "choco" and r["compressor"] == "top:0.01")]
    rows += runs("choco", "top:0.01", [0.699, 0.0, 0.0], status=["completed", "diverged", "diverged"])
    found, table = verdicts(rows)
    assert found["choco-matches-allreduce"] == "fails"  # the one surviving seed matches; two of three diverged
    assert "top:0.01 diverged in seed(s) 1, 2" in table.loc["choco-matches-allreduce", "measured"]


def test_a_gap_whose_interval_straddles_the_margin_is_inconclusive_and_a_wide_gap_fails():
    rows = [r for r in choco_everywhere() if not (r["algorithm"] == "choco" and r["compressor"] == "rand:0.01")]
    found, _ = verdicts(rows + runs("choco", "rand:0.01", [0.69, 0.67, 0.685]))  # paired gaps 1.0, 3.4, 1.1
    assert found["choco-matches-allreduce"] == "inconclusive"
    found, table = verdicts(rows + runs("choco", "rand:0.01", [0.60, 0.61, 0.59]))
    assert found["choco-matches-allreduce"] == "fails"
    assert "worst gap rand:0.01: 10.00 points" in table.loc["choco-matches-allreduce", "measured"]


def test_the_local_metric_is_read_only_where_every_worker_was_scored():
    rows = choco_everywhere()
    rows[5] = {**rows[5], "final_local_acc": math.nan}  # this run did not score all n local models at the end
    _, table = verdicts(rows)
    assert table.loc["choco-matches-allreduce", "reads"].startswith("final accuracy of the averaged model")
    # final_test_acc is 0.01 above final_local_acc in these rows: the gaps are read on one metric throughout
    assert "all-reduce 71.00 %" in table.loc["choco-matches-allreduce", "measured"]


def test_dcd_and_ecd_fail_only_when_every_named_cell_collapsed_in_every_seed():
    base = allreduce()
    collapsed = base + [r for c in DCD_FAILS for r in runs("dcd", c, 0.3)]
    collapsed += [r for c in ECD_FAILS for r in runs("ecd", c, 0.0, status="diverged")]
    found, table = verdicts(collapsed + runs("ecd", "qsgd:16", 0.69))  # 16 bits: not part of the claim
    assert found["dcd-fails-at-low-precision"] == "holds" and found["ecd-fails"] == "holds"
    assert "qsgd:4: 3 of 3 seeds collapsed, mean of the rest 30.0 %" in table.loc["dcd-fails-at-low-precision", "measured"]
    # one seed of one cell trained: the claim says every seed fails there
    survived = [r for r in collapsed if not (r["algorithm"] == "dcd" and r["compressor"] == "qsgd:4")]
    survived += runs("dcd", "qsgd:4", [0.3, 0.3, 0.66])
    found, table = verdicts(survived)
    assert found["dcd-fails-at-low-precision"] == "fails"
    assert "seed(s) 2 trained" in table.loc["dcd-fails-at-low-precision", "measured"]


def test_ecd_on_qsgd_8_alone_is_incomplete():
    """The committed smoke baseline had ecd-fails hold on QSGD-8 alone, with no sparsifier run."""
    found, table = verdicts(allreduce() + runs("ecd", "qsgd:8", 0.48))
    assert found["ecd-fails"] == "incomplete"
    assert "ecd/top:0.01: no finished runs" in table.loc["ecd-fails", "missing"]


# -- consensus -----------------------------------------------------------------------------------------------------
def _trace(method, delta, rate, rounds=400, floor=None):
    steps = np.arange(0, rounds + 1, 10)
    err = np.exp(-rate * steps)
    if floor is not None:
        err = np.maximum(err, floor)
    return pd.DataFrame({"method": method, "delta_measured": delta, "step": steps, "rel_error": err})


def _family_traces(**override):
    spec = {"qsgd:4": (0.3, 0.03), "rand:0.1": (0.1, 0.01), "top:0.1": (0.2, 0.02), "sign": (0.6, 0.06),
            "top:0.5": (0.5, 0.05)}
    spec.update(override)
    return pd.concat([_trace("exact", np.nan, 0.1, rounds=2000)] +
                     [_trace(m, d, r, rounds=2000) for m, (d, r) in spec.items()])


def test_choco_gossip_linear_and_ordered_by_delta_with_a_significant_test():
    found, table = verdicts([], _family_traces())
    assert found["choco-gossip-linear"] == "holds"
    assert "one-sided permutation p = 0.008 over 5 compressors" in table.loc["choco-gossip-linear", "measured"]
    # reversed order: significantly the wrong way
    wrong = _family_traces(**{"qsgd:4": (0.3, 0.03), "rand:0.1": (0.1, 0.06), "top:0.1": (0.2, 0.05),
                              "sign": (0.6, 0.01), "top:0.5": (0.5, 0.02)})
    assert verdicts([], wrong)[0]["choco-gossip-linear"] == "fails"
    # ordered but not significantly (4 points, ρ = 0.8)
    mixed = pd.concat([_trace("qsgd:4", 0.3, 0.02), _trace("rand:0.1", 0.1, 0.01), _trace("top:0.1", 0.2, 0.03),
                       _trace("sign", 0.6, 0.06)])
    assert verdicts([], mixed)[0]["choco-gossip-linear"] == "inconclusive"


def test_a_levelled_off_trace_is_reported_not_fitted_away():
    plateau = _family_traces()
    sign = _trace("sign", 0.6, 0.06, rounds=2000, floor=1e-6)  # an operator's own floor far above round-off
    plateau = pd.concat([plateau[plateau["method"] != "sign"], sign])
    found, table = verdicts([], plateau)
    assert found["choco-gossip-linear"] == "fails"
    assert "sign: " in table.loc["choco-gossip-linear", "measured"]
    assert "levelled off at 1e-06" in table.loc["choco-gossip-linear", "measured"]
    # down to round-off is convergence: the fit stops at 1e-12
    exact_floor = pd.concat([plateau[plateau["method"] != "sign"], _trace("sign", 0.6, 0.06, 2000, floor=1e-30)])
    assert verdicts([], exact_floor)[0]["choco-gossip-linear"] == "holds"


def test_a_power_law_is_not_linear_and_a_missing_family_is_incomplete():
    steps = np.arange(0, 2001, 10)
    sub = pd.DataFrame({"method": "top:0.1", "delta_measured": 0.2, "step": steps, "rel_error": 1 / (1 + steps) ** 2})
    traces = _family_traces()
    traces = pd.concat([traces[traces["method"] != "top:0.1"], sub])
    assert verdicts([], traces)[0]["choco-gossip-linear"] == "fails"
    no_sign = _family_traces()
    found, table = verdicts([], no_sign[no_sign["method"] != "sign"])
    assert found["choco-gossip-linear"] == "incomplete" and "a sign consensus trace" in table.loc["choco-gossip-linear", "missing"]


# -- the scaling study -------------------------------------------------------------------------------------------
CELLS = [("ring", 16, 0.05, 2.0), ("ring", 64, 0.003, 8.0), ("torus", 16, 0.4, 1.0), ("torus", 64, 0.117, 4.0),
         ("exponential", 16, 0.6, 0.5)]


def scaling_rows(cells=CELLS, jitter=(0.0, 0.3, -0.3), **extra):
    rows = []
    for n in sorted({c[1] for c in cells}):
        rows += [{**r, "nodes": n, "topology": "complete"} for r in allreduce(0.70)]
    for topology, n, rho, gap in cells:
        accs = [0.70 - gap / 100 + j / 100 for j in jitter]  # the same seed offsets in every cell
        rows += [{**r, "topology": topology, "nodes": n, "spectral_gap": rho, **extra}
                 for r in runs("choco", "sign", accs)]
    return rows


def test_the_gap_grows_as_the_spectral_gap_shrinks_and_the_torus_leads_at_the_largest_n():
    found, table = verdicts(scaling_rows())
    assert found["gap-grows-as-spectral-gap-shrinks"] == "holds", table.loc["gap-grows-as-spectral-gap-shrinks", "measured"]
    measured = table.loc["gap-grows-as-spectral-gap-shrinks", "measured"]
    assert "over 5 (topology, n) cells" in measured and "n = 64: torus minus ring 4.00 points" in measured
    flipped = [("ring", 16, 0.05, 8.0), ("ring", 64, 0.003, 1.0), ("torus", 16, 0.4, 9.0), ("torus", 64, 0.117, 4.0),
               ("exponential", 16, 0.6, 10.0)]
    assert verdicts(scaling_rows(flipped))[0]["gap-grows-as-spectral-gap-shrinks"] == "fails"


def test_the_scaling_claim_without_a_torus_is_incomplete():
    no_torus = [c for c in CELLS if c[0] != "torus"] + [("exponential", 64, 0.2, 3.0)]
    found, table = verdicts(scaling_rows(no_torus))
    assert found["gap-grows-as-spectral-gap-shrinks"] == "incomplete"
    assert "ring and torus at ≥ 2 common n" in table.loc["gap-grows-as-spectral-gap-shrinks", "missing"]


def test_a_negative_but_insignificant_spearman_is_inconclusive():
    weak = [("ring", 16, 0.05, 2.0), ("ring", 64, 0.003, 3.0), ("torus", 16, 0.4, 2.5), ("torus", 64, 0.117, 1.0),
            ("exponential", 16, 0.6, 1.5)]  # ρ = -0.6 over 5 cells: p ≈ 0.14
    found, table = verdicts(scaling_rows(weak))
    assert found["gap-grows-as-spectral-gap-shrinks"] == "inconclusive"
    assert "(inconclusive)" in table.loc["gap-grows-as-spectral-gap-shrinks", "measured"]


def test_both_halves_of_the_scaling_claim_read_one_metric():
    # a stale final_gap column (read on the averaged model by an older summary) that says the opposite is ignored
    rows = [{**r, "final_gap": -1.0} for r in scaling_rows()]
    assert verdicts(rows)[0]["gap-grows-as-spectral-gap-shrinks"] == "holds"
    rows[-1] = {**rows[-1], "final_local_acc": math.nan}
    _, table = verdicts(rows)
    assert table.loc["gap-grows-as-spectral-gap-shrinks", "reads"].startswith("final accuracy of the averaged model")


def test_the_gap_claim_reads_one_partition_the_iid_one():
    rows = scaling_rows()
    rows += [{**r, "data": "sorted", "final_local_acc": 0.9 - r["final_local_acc"] + 0.5}
             for r in scaling_rows() if r["algorithm"] == "choco"]  # on sorted data the relation is reversed
    found, table = verdicts(rows)
    assert found["gap-grows-as-spectral-gap-shrinks"] == "holds"
    assert "data shuffle" in table.loc["gap-grows-as-spectral-gap-shrinks", "measured"]


# -- bits ----------------------------------------------------------------------------------------------------------
def test_sign_choco_saves_bits_at_matched_accuracy_with_an_interval():
    rows = (runs("choco", "sign", 0.7, bits_to_target=4e6, metric="test_acc", target=0.6)
            + runs("dpsgd", "none", 0.7, bits_to_target=1.6e8, metric="test_acc", target=0.6))
    found, table = verdicts(rows)
    assert found["sign-choco-saves-bits"] == "holds"
    assert "geometric-mean saving 40.0×" in table.loc["sign-choco-saves-bits", "measured"]
    assert "averaged model" in table.loc["sign-choco-saves-bits", "reads"]  # the target is read on x̄'s curve
    missed = (runs("choco", "sign", 0.7, bits_to_target=math.inf)
              + runs("dpsgd", "none", 0.7, bits_to_target=1.6e8))
    found, table = verdicts(missed)
    assert found["sign-choco-saves-bits"] == "fails" and "missed the target" in table.loc["sign-choco-saves-bits", "measured"]
    neither = runs("choco", "sign", 0.7, bits_to_target=math.inf) + runs("dpsgd", "none", 0.7, bits_to_target=math.inf)
    assert verdicts(neither)[0]["sign-choco-saves-bits"] == "incomplete"
    one = [r for r in rows if r["seed"] == 0]
    assert verdicts(one)[0]["sign-choco-saves-bits"] == "incomplete"


# -- regress, the command and the report -------------------------------------------------------------------------
def test_regress_counts_a_claim_lost_since_the_baseline_and_shows_an_undecided_one():
    rows = [r for r in choco_everywhere() if not (r["algorithm"] == "choco" and r["compressor"] == "sign")]
    table = check_claims(pd.DataFrame(rows + runs("choco", "sign", 0.6)))
    baseline = {"cells": {}, "claims": {"choco-matches-allreduce": "holds", "ecd-fails": "holds",
                                        "dcd-fails-at-low-precision": "not run"}}
    assert baseline_problem(baseline) is None  # baselines written before "incomplete" still read
    rows_, regressions = compare(baseline, pd.DataFrame(columns=["cell"]), claims=table)
    (line,) = regressions
    assert line.startswith("paper claim choco-matches-allreduce held in the baseline and fails now")
    states = dict(zip(rows_.loc[rows_["cell"] == "(paper claim)", "check"], rows_.loc[rows_["cell"] == "(paper claim)", "verdict"]))
    assert states == {"choco-matches-allreduce": "regression", "ecd-fails": "undecided now (incomplete)",
                      "dcd-fails-at-low-precision": "ok"}
    assert baseline_problem({"cells": {}, "claims": {"x": "maybe"}}).startswith("claim x='maybe' is not one of")


def test_the_claims_command_writes_its_table_and_the_report_has_it(tmp_path, capsys):
    from analysis import cli
    from analysis.report import build_report
    from analysis_fixtures import make_run

    for seed in range(3):
        make_run(tmp_path / f"ar{seed}", algorithm="allreduce", compressor="none", seed=seed)
        make_run(tmp_path / f"ch{seed}", seed=seed)
    assert cli.main(["claims", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "claims.csv").set_index("claim")
    assert table.loc["choco-matches-allreduce", "verdict"] == "incomplete"  # sign alone of the eleven
    assert "| choco-matches-allreduce" in capsys.readouterr().out
    report = build_report(tmp_path, skipped=[])
    assert "## The paper's claims" in report and "*Needs*:" in report
    assert cli.main(["claims", str(tmp_path), "--min-seeds", "1"]) == 2


def test_the_markdown_says_what_each_claim_needs_and_reads():
    text = claims_markdown(check_claims(pd.DataFrame(choco_everywhere())))
    assert "| choco-matches-allreduce" in text and "*Reads*: final accuracy of the local models" in text


def test_the_bits_claim_reads_the_setting_where_a_run_reached_the_target():
    blind = [{**r, "nodes": 4} for r in runs("choco", "sign", 0.5, bits_to_target=math.inf)
             + runs("dpsgd", "none", 0.5, bits_to_target=math.inf)]  # sorts first; says nothing
    told = runs("choco", "sign", 0.7, bits_to_target=4e6) + runs("dpsgd", "none", 0.7, bits_to_target=1.6e8)
    found, table = verdicts(blind + told)
    assert found["sign-choco-saves-bits"] == "holds" and "ring, 8, data shuffle" in table.loc["sign-choco-saves-bits", "measured"]


def test_the_html_report_marks_every_verdict_decided_or_not():
    from analysis.report_html import _mark_verdicts

    cells = "".join(f"<td>{v}</td>" for v in ("holds", "fails", "inconclusive", "incomplete", "maybe"))
    marked = _mark_verdicts(cells)
    for verdict in ("holds", "fails", "inconclusive", "incomplete"):
        assert f'class="verdict-{verdict}">{verdict}</td>' in marked
    assert "<td>maybe</td>" in marked
