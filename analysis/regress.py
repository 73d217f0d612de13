"""Regression tracking: store a results set as a JSON baseline, compare a new results set (or a
perf JSON) with it under tolerances and a test across seeds, and name what regressed."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

DEFAULT_TOLERANCES = {
    "acc_tol": 0.02,    # absolute drop of the median final accuracy that counts
    "rel_tol": 0.10,    # relative slowdown of epochs / time to target that counts
    "alpha": 0.05,      # Mann-Whitney level; with 3 vs 3 seeds the smallest one-sided p is 1/20
    "min_seeds": 3,     # seeds needed on both sides before the test is used
}
PER_SEED = ["status", "tta_status", "final_test_acc", "best_test_acc", "epochs_to_target",
            "time_to_target_s", "bits_to_target", "bits_per_step", "paper_bits_per_step"]
EXACT = ["bits_per_step", "paper_bits_per_step"]
SLOWER = ["epochs_to_target", "time_to_target_s"]


def _enc(v):
    """JSON has no inf/NaN: inf is stored as the string "inf", NaN as null."""
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else ("inf" if math.isinf(v) else float(v))
    return v.item() if isinstance(v, np.generic) else v


def _dec(v) -> float:
    return math.inf if v == "inf" else (math.nan if v is None else float(v))


def make_baseline(summary: pd.DataFrame, cell_summary: pd.DataFrame, tolerances: dict | None = None) -> dict:
    """JSON-able baseline: per cell the per-seed values that matter and the cell's medians."""
    cells = {}
    medians = cell_summary.set_index("cell") if len(cell_summary) else pd.DataFrame()
    for cell, g in summary.sort_values("seed").groupby("cell", sort=True):
        first = g.iloc[0]
        entry = {k: _enc(first[k]) for k in ["task", "data", "algorithm", "compressor", "topology",
                                              "nodes", "network", "target"] if k in g}
        entry["seeds"] = [int(s) for s in g["seed"]]
        entry.update({k: [_enc(v) for v in g[k]] for k in PER_SEED if k in g})
        if cell in medians.index:
            entry["medians"] = {k: _enc(medians.loc[cell, k]) for k in medians.columns
                                if k.endswith("_median")}
        cells[cell] = entry
    targets = {f"{r.task}|{r.data}": _enc(r.target) for r in summary.itertuples() if "target" in summary}
    return {"kind": "analysis-baseline", "version": 1,
            "metric": str(summary["metric"].iloc[0]) if "metric" in summary and len(summary) else "test_acc",
            "tolerances": {**DEFAULT_TOLERANCES, **(tolerances or {})}, "targets": targets, "cells": cells}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _per_seed_problem(cell: str, key: str, values, n: int) -> str | None:
    if not isinstance(values, list) or len(values) != n:
        return f"cell {cell!r}: {key} is not a list of {n} values (one per seed)"
    if key in ("status", "tta_status"):
        bad = [v for v in values if not isinstance(v, str)]
    else:  # numbers, with inf stored as "inf" and NaN as null (see _enc)
        bad = [v for v in values if not (v is None or v == "inf" or _is_number(v))]
    return f"cell {cell!r}: {key} holds {bad[0]!r}" if bad else None


def baseline_problem(baseline) -> str | None:
    """Why a parsed baseline JSON cannot be compared with (a part missing or of a wrong type), or None."""
    if not isinstance(baseline, dict) or not isinstance(baseline.get("cells"), dict):
        return "no 'cells' object (make a baseline with `python -m analysis baseline`)"
    for key, kind, what in (("tolerances", dict, "an object"), ("targets", dict, "an object"),
                            ("metric", str, "a string"), ("claims", dict, "an object")):
        if baseline.get(key) is not None and not isinstance(baseline[key], kind):
            return f"{key} is {baseline[key]!r:.40}, not {what}"
    from analysis.claims.base import LEGACY_VERDICTS, VERDICTS

    known = (*VERDICTS, *LEGACY_VERDICTS)
    bad = [(k, v) for k, v in (baseline.get("claims") or {}).items() if v not in known]
    if bad:
        return f"claim {bad[0][0]}={bad[0][1]!r:.40} is not one of {', '.join(known)}"
    bad = [(k, v) for k, v in (baseline.get("tolerances") or {}).items() if not _is_number(v)]
    if bad:
        return f"tolerance {bad[0][0]}={bad[0][1]!r} is not a number"
    bad = [(k, v) for k, v in (baseline.get("targets") or {}).items() if not (v is None or v == "inf" or _is_number(v))]
    if bad:
        return f"target {bad[0][0]}={bad[0][1]!r} is not a number"
    for cell, entry in baseline["cells"].items():
        if not isinstance(entry, dict):
            return f"cell {cell!r} is {entry!r:.40}, not an object"
        seeds = entry.get("seeds")
        if not isinstance(seeds, list) or not all(_is_number(s) and s == int(s) for s in seeds):
            return f"cell {cell!r}: seeds is {seeds!r:.40}, not a list of integers"
        if len(set(seeds)) != len(seeds):
            return f"cell {cell!r}: seeds {seeds!r:.40} repeat a seed (one run per seed; remake the baseline)"
        if "status" not in entry:
            return f"cell {cell!r} has no status"
        for key in (k for k in PER_SEED if k in entry):
            why = _per_seed_problem(cell, key, entry[key], len(seeds))
            if why:
                return why
    return None


def perf_problem(perf) -> str | None:
    """Why a parsed perf JSON cannot be compared (figures missing or of a wrong type), or None."""
    if not isinstance(perf, dict) or not isinstance(perf.get("figures"), dict):
        return "no 'figures' object (write one with `bench perf`)"
    for name, figure in perf["figures"].items():
        if not isinstance(figure, dict):
            return f"figure {name!r} is {figure!r:.40}, not an object"
        if not _is_number(figure.get("median")):
            return f"figure {name!r}: median is {figure.get('median')!r:.40}, not a number"
        if not isinstance(figure.get("higher_is_better", True), bool):
            return f"figure {name!r}: higher_is_better is {figure['higher_is_better']!r:.40}, not true or false"
        if not isinstance(figure.get("kind", ""), str):
            return f"figure {name!r}: kind is {figure['kind']!r:.40}, not a string"
    return None


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _median(values) -> float:
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return float(np.median(v)) if v.size else math.nan


def _compare_cell(cell: str, base: dict, cur: pd.DataFrame, tol: dict):
    from scipy import stats  # imported where used: 0.5 s a process
    rows, bad = [], []

    def row(check, b, c, change, test, verdict, why=None):
        rows.append({"cell": cell, "check": check, "baseline": b, "current": c, "change": change,
                     "test": test, "verdict": verdict})
        if why:
            bad.append(f"{cell}: {why}")

    seeds = base["seeds"]
    cur_by_seed = {int(r.seed): r for r in cur.itertuples()}
    # status: exact, seed by seed
    changes = []
    for i, seed in enumerate(seeds):
        if seed not in cur_by_seed:
            changes.append(f"seed {seed} missing")
        elif cur_by_seed[seed].status != base["status"][i]:
            new = cur_by_seed[seed].status
            note = " (newly diverged)" if new == "diverged" else ""
            changes.append(f"seed {seed} status {base['status'][i]} -> {new}{note}")
    row("status", ",".join(base["status"]), ",".join(cur.sort_values("seed")["status"]), "", "exact",
        "regression" if changes else "ok", "; ".join(changes) if changes else None)
    # bits per step: exact, seed by seed (same compressor and topology must send the same bits)
    for col in EXACT:
        if col not in base:
            continue
        diffs = [f"seed {s}: {_dec(base[col][i]):.6g} -> {getattr(cur_by_seed[s], col):.6g}"
                 for i, s in enumerate(seeds) if s in cur_by_seed
                 and not _same(_dec(base[col][i]), float(getattr(cur_by_seed[s], col)))]
        b, c = _median([_dec(v) for v in base[col]]), _median(cur[col])
        row(col, b, c, c - b, "exact", "regression" if diffs else "ok",
            f"{col.replace('_', ' ')} changed ({'; '.join(diffs)})" if diffs else None)
    # final accuracy: tolerance on the medians, and a rank test when both sides have enough seeds
    b_acc = np.array([_dec(v) for v in base.get("final_test_acc", [])], float)
    c_acc = cur["final_test_acc"].to_numpy(float)
    b_acc, c_acc = b_acc[~np.isnan(b_acc)], c_acc[~np.isnan(c_acc)]
    if b_acc.size and c_acc.size:
        b, c = float(np.median(b_acc)), float(np.median(c_acc))
        drop = b - c
        if min(b_acc.size, c_acc.size) >= tol["min_seeds"]:
            p = float(stats.mannwhitneyu(b_acc, c_acc, alternative="greater").pvalue)
            test = f"tol {tol['acc_tol']:g} + mann-whitney p={p:.3g}"
            # p <= alpha, not <: with 3 seeds a side, 0.05 is the strongest evidence there can be
            worse = drop > tol["acc_tol"] and p <= tol["alpha"] + 1e-12
        else:
            test = f"tol {tol['acc_tol']:g} only ({min(b_acc.size, c_acc.size)} seeds < {tol['min_seeds']})"
            worse = drop > tol["acc_tol"]
        row("final_test_acc", b, c, c - b, test, "regression" if worse else "ok",
            f"final accuracy down {drop:.4f} ({b:.4f} -> {c:.4f}; {test})" if worse else None)
    elif b_acc.size:
        row("final_test_acc", float(np.median(b_acc)), math.nan, math.nan, "", "regression",
            "final accuracy no longer available")
    # epochs and time to target: relative tolerance on the medians; finite -> inf is a regression
    for col in SLOWER:
        if col not in base or col not in cur:
            continue
        b, c = _median([_dec(v) for v in base[col]]), _median(cur[col])
        if math.isnan(b) or math.isnan(c):
            continue
        if math.isinf(c) and math.isfinite(b):
            worse, why = True, f"{col} was {b:.4g}, target no longer reached"
        else:
            worse = math.isfinite(b) and c > b * (1 + tol["rel_tol"])
            why = f"{col} slower by {c / b - 1:.1%} ({b:.4g} -> {c:.4g}; tol {tol['rel_tol']:.0%})" if worse else None
        change = c / b - 1 if math.isfinite(b) and math.isfinite(c) and b > 0 else math.nan
        row(col, b, c, change, f"rel tol {tol['rel_tol']:g}", "regression" if worse else "ok", why)
    return rows, bad


def compare(baseline: dict, current_summary: pd.DataFrame, tolerances: dict | None = None,
            claims: pd.DataFrame | None = None):
    """(table, regressions): one table row per cell × check, and one line per regression; with
    ``claims`` (analysis.claims.check_claims of the current results), a paper claim that held in the
    baseline and fails now is one too."""
    tol = {**DEFAULT_TOLERANCES, **baseline.get("tolerances", {}), **(tolerances or {})}
    rows, regressions = [], []
    groups = dict(tuple(current_summary.groupby("cell"))) if len(current_summary) else {}
    for cell, base in sorted(baseline["cells"].items()):
        if cell not in groups:
            rows.append({"cell": cell, "check": "present", "baseline": len(base["seeds"]), "current": 0,
                         "change": math.nan, "test": "", "verdict": "missing"})
            regressions.append(f"{cell}: missing from the current results")
            continue
        r, bad = _compare_cell(cell, base, groups[cell], tol)
        rows += r
        regressions += bad
    for cell in sorted(set(groups) - set(baseline["cells"])):
        rows.append({"cell": cell, "check": "present", "baseline": 0, "current": len(groups[cell]),
                     "change": math.nan, "test": "", "verdict": "new (not in baseline)"})
    now = dict(zip(claims["claim"], zip(claims["verdict"], claims["measured"]))) if claims is not None else {}
    for name, before in sorted((baseline.get("claims") or {}).items()):
        if name not in now:
            continue
        verdict, measured = now[name]
        # only a decided verdict can lose a claim: one the current results cannot decide (incomplete,
        # inconclusive) is shown as such, not counted
        lost = before == "holds" and verdict == "fails"
        state = "regression" if lost else ("ok" if verdict in ("holds", "fails") or before != "holds"
                                           else f"undecided now ({verdict})")
        rows.append({"cell": "(paper claim)", "check": name, "baseline": before, "current": verdict,
                     "change": math.nan, "test": "claim", "verdict": state})
        if lost:
            regressions.append(f"paper claim {name} held in the baseline and fails now: {measured}")
    return pd.DataFrame(rows, columns=["cell", "check", "baseline", "current", "change", "test", "verdict"]), regressions


def compare_perf(base: dict, current: dict, rel_tol: float = 0.15):
    """(table, regressions) for two perf JSON files; only ``kind == "ratio"`` figures are compared
    (absolute timings depend on the machine), by their medians."""
    rows, regressions = [], []
    cur_figs = current.get("figures", {})
    for name, b in sorted(base.get("figures", {}).items()):
        if b.get("kind") != "ratio":
            rows.append({"figure": name, "baseline": b.get("median"), "current": cur_figs.get(name, {}).get("median"),
                         "change": math.nan, "verdict": "not compared (absolute)"})
            continue
        if name not in cur_figs:
            rows.append({"figure": name, "baseline": b["median"], "current": math.nan, "change": math.nan,
                         "verdict": "missing"})
            regressions.append(f"perf {name}: missing from the current perf file")
            continue
        bm, cm = float(b["median"]), float(cur_figs[name]["median"])
        higher = bool(b.get("higher_is_better", True))
        change = cm / bm - 1 if bm else math.nan
        worse = cm < bm * (1 - rel_tol) if higher else cm > bm * (1 + rel_tol)
        rows.append({"figure": name, "baseline": bm, "current": cm, "change": change,
                     "verdict": "regression" if worse else "ok"})
        if worse:
            regressions.append(f"perf {name}: median {bm:.4g} -> {cm:.4g} {b.get('unit', '')} "
                               f"({change:+.1%}; {'higher' if higher else 'lower'} is better, tol {rel_tol:.0%})")
    return pd.DataFrame(rows, columns=["figure", "baseline", "current", "change", "verdict"]), regressions
