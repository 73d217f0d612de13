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
from analysis.claims.stats import bootstrap_correlation_difference, bootstrap_mean, spearman, spearman_test
from analysis.claims.table1 import DCD_FAILS, ECD_FAILS, TABLE1
from analysis.regress import baseline_problem, compare
from analysis.summary import LATER_COLUMNS, SUMMARY_COLUMNS, read_summary

SETTING = {"task": "mnist1d-mlp", "topology": "ring", "nodes": 8, "data": "shuffle", "network": "datacenter-10g"}
SEEDS = (0, 1, 2)
MATCH, DCD, ECD, LINEAR, GAP, BITS = ("choco-matches-allreduce", "dcd-fails-at-low-precision", "ecd-fails",
                                      "choco-gossip-linear", "gap-grows-as-spectral-gap-shrinks",
                                      "sign-choco-saves-bits")


def runs(algorithm, compressor, accs, status="completed", **extra):
    """One row per seed; ``accs`` per seed (a float for all), NaN accuracy where ``status`` is diverged."""
    accs = [accs] * len(SEEDS) if isinstance(accs, float) else accs
    statuses = [status] * len(accs) if isinstance(status, str) else status
    return [{**SETTING, "algorithm": algorithm, "compressor": compressor, "seed": s, "status": st,
             "final_test_acc": (math.nan if st == "diverged" else a) + 0.01,
             "final_local_acc": math.nan if st == "diverged" else a, **extra}
            for s, (a, st) in enumerate(zip(accs, statuses))]


def verdicts(rows, traces=None, **kw):
    table = check_claims(pd.DataFrame(rows), traces, **kw)
    return dict(zip(table["claim"], table["verdict"])), table.set_index("claim")


def allreduce(acc=0.70):
    return runs("allreduce", "none", [acc, acc + 0.004, acc - 0.004])


def choco_everywhere(gap_points=0.5, but=None, instead=()):
    """All-reduce and Choco with every compressor of Table 1, ``gap_points`` below it; ``but``'s runs replaced
    by ``instead``."""
    rows = allreduce()
    for comp in TABLE1:
        if comp != but:
            rows += runs("choco", comp, [0.70 - gap_points / 100 + 0.001 * k for k in (0, 1, -1)])
    return rows + list(instead)


def _edit(rows, where, **change):
    return [{**r, **change} if where(r) else r for r in rows]


def collapsed():
    return (allreduce() + [r for c in DCD_FAILS for r in runs("dcd", c, 0.3)]
            + [r for c in ECD_FAILS for r in runs("ecd", c, 0.0, status="diverged")])


# -- consensus -----------------------------------------------------------------------------------------------------
def _trace(method, delta, rate, rounds=400, floor=None):
    steps = np.arange(0, rounds + 1, 10)
    err = np.exp(-rate * steps) if floor is None else np.maximum(np.exp(-rate * steps), floor)
    return pd.DataFrame({"method": method, "delta_measured": delta, "step": steps, "rel_error": err})


def family(drop=(), **override):
    spec = {"qsgd:4": (0.3, 0.03), "rand:0.1": (0.1, 0.01), "top:0.1": (0.2, 0.02), "sign": (0.6, 0.06),
            "top:0.5": (0.5, 0.05), **override}
    return pd.concat([_trace("exact", np.nan, 0.1, rounds=2000)] +
                     [_trace(m, d, r, rounds=2000, floor=f[0] if f else None) for m, (d, r, *f) in spec.items()
                      if m not in drop])


def power_law():
    steps = np.arange(0, 2001, 10)
    sub = pd.DataFrame({"method": "top:0.1", "delta_measured": 0.2, "step": steps, "rel_error": 1 / (1 + steps) ** 2})
    return pd.concat([family(drop=("top:0.1",)), sub])


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


def bits(choco, dpsgd, acc=0.7, **extra):
    return runs("choco", "sign", acc, bits_to_target=choco, **extra) + runs("dpsgd", "none", acc, bits_to_target=dpsgd,
                                                                            **extra)


SAVED = bits(4e6, 1.6e8, metric="test_acc", target=0.6)


# -- the spectral study: the gap follows the effective number of neighbours n_W better than ρ ------------------
# ρ and n_W(0.9) of graphs at n = 16 as `bench topology` reports them
GRAPHS = {"complete": (1.0, 16.0), "base:3": (1.0, 12.31), "base:1": (1.0, 7.8), "ring": (0.051, 6.6),
          "star": (0.062, 2.32), "torus": (0.4, 12.23), "random-regular:6": (0.394, 13.79),
          "exponential": (0.5, 14.35), "erdos-renyi:0.2": (0.108, 8.65)}
NEIGHBOURS = "gap-follows-effective-neighbours"


def spectral(gap_of=lambda rho, n_w: 40.0 / n_w, graphs=tuple(GRAPHS), with_n_eff=True, but=None):
    """All-reduce at 70 % and Choco (sign) and D-PSGD on each graph at 70 % − gap_of(ρ, n_W) points, 3 seeds
    (the same offsets in every cell); ``but`` (topology, seed) left out."""
    rows = [{**r, "nodes": 16, "topology": "complete"} for r in runs("allreduce", "none", 0.70)]
    for algorithm, comp in (("choco", "sign"), ("dpsgd", "none")):
        for topology in graphs:
            rho, n_w = GRAPHS[topology]
            rows += [{**r, "nodes": 16, "topology": topology, "spectral_gap": rho, **({"n_eff": n_w} if with_n_eff
                                                                                        else {})}
                     for r in runs(algorithm, comp, [0.70 - (gap_of(rho, n_w) + j) / 100 for j in (0.0, 0.2, -0.2)])
                     if (topology, r["seed"]) != but]
    return rows


# (summary rows, consensus traces, claim, verdict, texts the table's columns hold)
@pytest.mark.parametrize("rows, traces, claim, verdict, said", [
    (choco_everywhere(), None, MATCH, "holds", {"asserts": ["Choco-SGD stays within 2 points of all-reduce"],
        "measured": ["95 % bootstrap interval", "3 seeds", "11 of 11 compressors"],
        "reads": ["final accuracy of the local models"]}),
    (allreduce() + runs("choco", "sign", 0.699), None, MATCH, "incomplete",  # one compressor of "every"
     {"missing": ["choco/qsgd:16: no finished runs"]}),
    ([r for r in choco_everywhere() if r["seed"] == 0], None, MATCH, "incomplete",  # one seed is no evidence
     {"missing": ["all-reduce: 1 of 3 seeds"]}),
    (_edit(choco_everywhere(), lambda r: (r["algorithm"], r["compressor"], r["seed"]) == ("choco", "sign", 2),
           status="failed"), None, MATCH, "incomplete",
     {"missing": ["choco/sign: 2 of 3 seeds paired with the reference (seeds 0, 1) (1 failed)"]}),
    # diverged seeds count where a claim says a method trains: the one surviving seed matches
    (choco_everywhere(but="top:0.01", instead=runs("choco", "top:0.01", [0.699, 0.0, 0.0],
                                                   status=["completed", "diverged", "diverged"])), None, MATCH,
     "fails", {"measured": ["top:0.01 diverged in seed(s) 1, 2"]}),
    (choco_everywhere(but="rand:0.01", instead=runs("choco", "rand:0.01", [0.69, 0.67, 0.685])), None, MATCH,
     "inconclusive", {}),  # paired gaps 1.0, 3.4, 1.1: the interval straddles the margin
    (choco_everywhere(but="rand:0.01", instead=runs("choco", "rand:0.01", [0.60, 0.61, 0.59])), None, MATCH,
     "fails", {"measured": ["worst gap rand:0.01: 10.00 points"]}),
    # a run that did not score all n local models at the end: the gaps are read on one metric throughout
    ([{**r, "final_local_acc": math.nan} if i == 5 else r for i, r in enumerate(choco_everywhere())], None, MATCH,
     "holds", {"reads": ["final accuracy of the averaged model"], "measured": ["all-reduce 71.00 %"]}),
    (collapsed() + runs("ecd", "qsgd:16", 0.69), None, DCD, "holds",  # 16 bits: not part of the claim
     {"measured": ["qsgd:4: 3 of 3 seeds collapsed, mean of the rest 30.0 %"]}),
    (collapsed() + runs("ecd", "qsgd:16", 0.69), None, ECD, "holds", {}),
    ([r for r in collapsed() if (r["algorithm"], r["compressor"]) != ("dcd", "qsgd:4")]
     + runs("dcd", "qsgd:4", [0.3, 0.3, 0.66]), None, DCD, "fails", {"measured": ["seed(s) 2 trained"]}),
    # the committed smoke baseline had ecd-fails hold on QSGD-8 alone, with no sparsifier run
    (allreduce() + runs("ecd", "qsgd:8", 0.48), None, ECD, "incomplete",
     {"missing": ["ecd/top:0.01: no finished runs"]}),
    ([], family(), LINEAR, "holds", {"measured": ["one-sided permutation p = 0.008 over 5 compressors"]}),
    ([], family(**{"rand:0.1": (0.1, 0.06), "top:0.1": (0.2, 0.05), "sign": (0.6, 0.01), "top:0.5": (0.5, 0.02)}),
     LINEAR, "fails", {}),  # significantly the wrong way
    ([], pd.concat([_trace("qsgd:4", 0.3, 0.02), _trace("rand:0.1", 0.1, 0.01), _trace("top:0.1", 0.2, 0.03),
                    _trace("sign", 0.6, 0.06)]), LINEAR, "inconclusive", {}),  # ordered, not significantly (ρ = 0.8)
    # an operator's own floor far above round-off is reported, not fitted away; down to round-off is convergence
    ([], family(sign=(0.6, 0.06, 1e-6)), LINEAR, "fails", {"measured": ["sign: ", "levelled off at 1e-06"],
                                                          "reason": ["sign levels off at 1e-06, far above round-off"]}),
    ([], family(sign=(0.6, 0.06, 1e-30)), LINEAR, "holds", {}),
    ([], power_law(), LINEAR, "fails", {}),  # a power law is not linear
    ([], family(drop=("sign",)), LINEAR, "incomplete", {"missing": ["a sign consensus trace"]}),
    (scaling_rows(), None, GAP, "holds", {"measured": ["over 5 (topology, n) cells",
                                                       "n = 64: torus minus ring 4.00 points"]}),
    (scaling_rows([("ring", 16, 0.05, 8.0), ("ring", 64, 0.003, 1.0), ("torus", 16, 0.4, 9.0),
                   ("torus", 64, 0.117, 4.0), ("exponential", 16, 0.6, 10.0)]), None, GAP, "fails", {}),
    (scaling_rows([c for c in CELLS if c[0] != "torus"] + [("exponential", 64, 0.2, 3.0)]), None, GAP, "incomplete",
     {"missing": ["ring and torus at ≥ 2 common n"]}),
    (scaling_rows([("ring", 16, 0.05, 2.0), ("ring", 64, 0.003, 3.0), ("torus", 16, 0.4, 2.5),
                   ("torus", 64, 0.117, 1.0), ("exponential", 16, 0.6, 1.5)]), None, GAP, "inconclusive",
     {"measured": ["(inconclusive)"]}),  # ρ = -0.6 over 5 cells: p ≈ 0.14
    # a stale final_gap column (read on the averaged model by an older summary) that says the opposite is ignored
    ([{**r, "final_gap": -1.0} for r in scaling_rows()], None, GAP, "holds", {}),
    (scaling_rows()[:-1] + [{**scaling_rows()[-1], "final_local_acc": math.nan}], None, GAP, "holds",
     {"reads": ["final accuracy of the averaged model"]}),  # both halves of the claim read one metric
    (scaling_rows() + [{**r, "data": "sorted", "final_local_acc": 0.9 - r["final_local_acc"] + 0.5}
                       for r in scaling_rows() if r["algorithm"] == "choco"], None, GAP, "holds",
     {"measured": ["data shuffle"]}),  # on sorted data the relation is reversed: the claim reads the i.i.d. one
    (spectral(), None, NEIGHBOURS, "holds", {"measured": ["Spearman(n_W, gap) = -1.00", "over 9 graphs",
                                                          "base:1 and base:3"]}),  # the equal-ρ pairs tell them apart
    (spectral(lambda rho, n_w: -2.0 * math.log(rho) + 0.01 * n_w), None, NEIGHBOURS, "fails", {}),
    (spectral(graphs=("ring", "erdos-renyi:0.2", "torus", "exponential", "complete")), None, NEIGHBOURS,
     "incomplete", {"missing": ["two graphs of equal ρ"]}),  # graphs on which ρ and n_W agree cannot decide
    (spectral(graphs=("complete", "base:1", "ring", "star")), None, NEIGHBOURS, "incomplete",
     {"missing": ["≥ 5 graphs of choco/sign (have 4)"]}),
    (spectral(but=("star", 2)), None, NEIGHBOURS, "incomplete", {"missing": ["star"]}),
    (spectral(with_n_eff=False), None, NEIGHBOURS, "incomplete", {"missing": ["n_eff"]}),  # an older summary
    (SAVED, None, BITS, "holds", {"measured": ["geometric-mean saving 40.0×"], "reads": ["averaged model"]}),
    (bits(math.inf, 1.6e8), None, BITS, "fails", {"measured": ["missed the target"]}),
    (bits(math.inf, math.inf), None, BITS, "incomplete", {}),
    # the setting where a run reached the target is read, not one that sorts first and says nothing
    ([{**r, "nodes": 4} for r in bits(math.inf, math.inf, acc=0.5)] + bits(4e6, 1.6e8), None, BITS, "holds",
     {"measured": ["ring, 8, data shuffle"]}),
])
def test_a_claims_verdict_and_what_it_says(rows, traces, claim, verdict, said):
    found, table = verdicts(rows, traces)
    assert found[claim] == verdict, table.loc[claim, "measured"]
    assert {column: [text for text in texts if text in table.loc[claim, column]] for column, texts in said.items()} \
        == said


def test_the_statistics_the_verdicts_state():
    mean, low, high = bootstrap_mean([1.0, 2.0, 3.0])
    assert mean == 2.0 and 1.0 <= low < 2.0 < high <= 3.0
    assert bootstrap_mean([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0) and bootstrap_mean([1.0, math.inf])[0] == math.inf
    # the permutation test is exact on few points: 4 orderings of 24 reach ρ = 0.8 (1 of 120: LINEAR's p = 0.008)
    assert spearman_test([1, 2, 3, 4], [10, 20, 30, 40], "less")[1] == pytest.approx(1.0)
    assert spearman_test([1, 2, 3, 4], [20, 10, 30, 40], "greater") == pytest.approx((0.8, 4 / 24))
    # the difference of two predictors' correlations, its interval, and the pairs that tell them apart
    x = np.arange(8.0)
    assert bootstrap_correlation_difference(x, x, -x) == (0.0, 0.0, 0.0)  # one predictor twice: no difference
    noisy = x + np.array([3, -3, 2, -2, 1, -1, 0, 0])
    d, low, high = bootstrap_correlation_difference(noisy, x, -x)
    assert d == pytest.approx(spearman(noisy, -x) + 1.0) and low <= d <= high and d > 0
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="at least 3 points"):
        bootstrap_correlation_difference([1, 2], [1, 2], [1, 2])


def test_every_claim_is_incomplete_on_an_empty_study_and_seeds_are_counted_from_two():
    found, table = verdicts([])
    assert set(found) == {c.name for c in CLAIMS} and set(found.values()) == {"incomplete"}
    assert all(table["missing"].str.len() > 0) and all(table["needs"].str.len() > 0)
    one_seed = [r for r in choco_everywhere() if r["seed"] == 0]
    assert verdicts(one_seed, min_seeds=2)[0][MATCH] == "incomplete"
    assert "choco/sign" not in verdicts(allreduce() + runs("choco", "sign", 0.699))[1].loc[MATCH, "missing"]
    with pytest.raises(ValueError, match="at least 2 seeds"):
        check_claims(pd.DataFrame(one_seed), min_seeds=1)


# -- regress, the command and the report -------------------------------------------------------------------------
def test_regress_counts_a_claim_lost_since_the_baseline_and_shows_an_undecided_one():
    table = check_claims(pd.DataFrame(choco_everywhere(but="sign", instead=runs("choco", "sign", 0.6))))
    baseline = {"cells": {}, "claims": {MATCH: "holds", ECD: "holds", DCD: "not run"}}
    assert baseline_problem(baseline) is None  # baselines written before "incomplete" still read
    rows, regressions = compare(baseline, pd.DataFrame(columns=["cell"]), claims=table)
    (line,) = regressions
    assert line.startswith(f"paper claim {MATCH} held in the baseline and fails now")
    claims = rows[rows["cell"] == "(paper claim)"]
    assert dict(zip(claims["check"], claims["verdict"])) == {MATCH: "regression", ECD: "undecided now (incomplete)",
                                                             DCD: "ok"}
    assert baseline_problem({"cells": {}, "claims": {"x": "maybe"}}).startswith("claim x='maybe' is not one of")


def test_the_claims_command_writes_its_table_and_the_report_has_it(tmp_path, capsys):
    from analysis import cli
    from analysis.report import build_report
    from analysis_fixtures import make_run

    for seed in range(3):
        make_run(tmp_path / f"ar{seed}", algorithm="allreduce", compressor="none", seed=seed)
        make_run(tmp_path / f"ch{seed}", seed=seed)
    assert cli.main(["claims", str(tmp_path)]) == 0
    # named by what it asserts, in words without a double negative, with the reason a newcomer reads
    assert "compressor | not tested here | needs cells or seeds" in " ".join(capsys.readouterr().out.split())
    report = build_report(tmp_path, skipped=[])
    assert "## The paper's claims" in report and "*Needs*:" in report
    assert cli.main(["claims", str(tmp_path), "--min-seeds", "1"]) == 2
    text = claims_markdown(check_claims(pd.DataFrame(choco_everywhere())))
    assert f"| `{MATCH}`" in text and "*Reads*: final accuracy of the local models" in text


def test_a_summary_from_before_the_n_eff_column_still_reads(tmp_path):
    assert LATER_COLUMNS <= set(SUMMARY_COLUMNS)
    old = pd.DataFrame([{c: math.nan for c in SUMMARY_COLUMNS if c not in LATER_COLUMNS}])
    old["cell"], old["run_id"], old["status"], old["nodes"], old["seed"] = "c", "r", "completed", 16, 0
    old.to_csv(tmp_path / "summary.csv", index=False)
    assert "n_eff" not in read_summary(tmp_path / "summary.csv")
