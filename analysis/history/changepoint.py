"""The statistics of `python -m analysis history`: the Mann-Whitney test (mann_whitney, smallest_p), the
change of a median and its verdict against a tolerance (change, verdict), change points by binary
segmentation with a Bonferroni-adjusted two-sided Mann-Whitney test of each split (find_steps), and
analyse, which for every series gives its steps, the newest commit's verdict against the commits since the
last step (one-sided test in the worse direction, and the tolerance) and how noisy the quantity is."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.history.records import _is_number

ALPHA, MIN_SIDE, WINDOW = 0.05, 3, 10


# -- the statistics ---------------------------------------------------------------------------------------
def mann_whitney(a, b, alternative: str = "two-sided") -> float:
    """p-value of a Mann-Whitney U test of ``a`` against ``b`` (1 when either is empty or all values tie)."""
    from scipy import stats  # imported where used: 0.5 s a process
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not a.size or not b.size:
        return 1.0
    both = np.concatenate([a, b])
    if np.all(both == both[0]):
        return 1.0
    p = float(stats.mannwhitneyu(a, b, alternative=alternative).pvalue)
    return 1.0 if math.isnan(p) else p


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest one-sided p-value a Mann-Whitney test of n_a against n_b values can give."""
    return 1.0 / math.comb(n_a + n_b, n_a) if n_a and n_b else 1.0


def change(before: float, after: float, mode: str) -> float:
    """The change of a median: relative (after / before - 1) or absolute (after - before); inf when a finite
    value became infinite (a target no longer reached), 0 when both are infinite."""
    if math.isnan(before) or math.isnan(after):
        return math.nan
    if math.isinf(before) or math.isinf(after):
        if math.isinf(before) and math.isinf(after):
            return 0.0
        if math.isinf(after):
            return math.copysign(math.inf, after)
        return -1.0 if mode == "rel" else math.copysign(math.inf, -before)
    if mode == "abs":
        return after - before
    if before == 0:
        return 0.0 if after == 0 else math.copysign(math.inf, after)
    return after / before - 1


def verdict(size: float, higher_is_better: bool, tol: float) -> str:
    """regression, improvement or within tolerance, for a change ``size`` against tolerance ``tol``."""
    if math.isnan(size):
        return "within tolerance"
    worse = size < -tol if higher_is_better else size > tol
    better = size > tol if higher_is_better else size < -tol
    return "regression" if worse else "improvement" if better else "within tolerance"


def find_steps(values: list[np.ndarray], alpha: float = ALPHA, min_side: int = MIN_SIDE) -> list[dict]:
    """Change points of a series (one array of values per point, in order), by binary segmentation: each
    segment's best split by a two-sided Mann-Whitney test, kept when p x (splits tried) < alpha. One dict per
    step, in order: index of the first point after it, p, p_adj (Bonferroni), splits tried."""
    found = []

    def search(lo: int, hi: int) -> None:
        splits = list(range(lo + min_side, hi - min_side + 1))
        if not splits:
            return
        best_p, best_k = 2.0, None
        for k in splits:
            before, after = np.concatenate(values[lo:k]), np.concatenate(values[k:hi])
            p = mann_whitney(before, after)
            if p < best_p:
                best_p, best_k = p, k
        p_adj = min(1.0, best_p * len(splits))
        if best_k is None or p_adj >= alpha:
            return
        found.append({"index": best_k, "p": best_p, "p_adj": p_adj, "splits": len(splits)})
        search(lo, best_k)
        search(best_k, hi)

    search(0, len(values))
    return sorted(found, key=lambda s: s["index"])


def _median(values) -> float:
    v = np.asarray(values, float)
    v = v[~np.isnan(v)]
    return float(np.median(v)) if v.size else math.nan


def tolerance(series: dict, tolerances: dict, overridden: frozenset = frozenset()) -> tuple[str, float]:
    """(mode, tolerance) of a series: its kind's, except that an agreement figure with a bound of its own
    (g.*_difference <= 0.01) may move by that bound, unless --tol agreement=... says otherwise."""
    mode, tol = tolerances[series["kind"]]
    if series["kind"] == "agreement" and _is_number(series.get("bound")) and "agreement" not in overridden:
        tol = float(series["bound"])
    return mode, tol


def analyse(series: dict[str, dict], points: list[str], info: dict[str, dict], tolerances: dict,
            alpha: float = ALPHA, min_side: int = MIN_SIDE, window: int = WINDOW, overridden: frozenset = frozenset()):
    """(steps, newest, noise) tables of every series (each series gets its "tolerance")."""
    steps, newest, noise = [], [], []
    newest_point = points[-1] if points else None
    for quantity, s in series.items():
        mode, tol = s["tolerance"] = tolerance(s, tolerances, overridden)
        found = find_steps(s["values"], alpha, min_side)
        bounds = [0, *[f["index"] for f in found], len(s["values"])]
        for i, f in enumerate(found):
            before = np.concatenate(s["values"][bounds[i]:f["index"]])
            after = np.concatenate(s["values"][f["index"]:bounds[i + 2]])
            b, a = _median(before), _median(after)
            size = change(b, a, mode)
            first = s["points"][f["index"]]
            steps.append({"quantity": quantity, "kind": s["kind"], "first_commit": first,
                          "describe": info[first]["describe"], "subject": info[first]["subject"][:80],
                          "previous_commit": s["points"][f["index"] - 1], "before_median": b, "after_median": a,
                          "change": size, "mode": mode, "tolerance": tol, "p": f["p"], "p_adj": f["p_adj"],
                          "splits": f["splits"], "verdict": verdict(size, s["higher_is_better"], tol)})
        # the newest commit against the commits since the last step (at most `window` of them)
        row = {"quantity": quantity, "kind": s["kind"], "commit": newest_point, "mode": mode, "tolerance": tol}
        if s["points"][-1] != newest_point:
            newest.append({**row, "verdict": "not measured"})
        elif len(s["points"]) < 2:
            newest.append({**row, "verdict": "first commit"})
        else:
            start = max(bounds[-2] if len(bounds) > 2 else 0, len(s["points"]) - 1 - window)
            prior = np.concatenate(s["values"][start:-1])
            latest = s["values"][-1]
            b, a = _median(prior), _median(latest)
            size = change(b, a, mode)
            worse_side = "less" if s["higher_is_better"] else "greater"
            finite_a, finite_b = latest[~np.isnan(latest)], prior[~np.isnan(prior)]
            p = mann_whitney(finite_a, finite_b, worse_side)
            floor = smallest_p(finite_a.size, finite_b.size)
            v = verdict(size, s["higher_is_better"], tol)
            testable = floor <= alpha
            test = (f"mann-whitney p={p:.3g}" if testable else
                    f"tolerance only ({finite_a.size} vs {finite_b.size} values: smallest p {floor:.2g} > {alpha:g})")
            if v == "regression":
                # it starts here only when the commit before was not as bad already (a step too recent to be
                # detected, with fewer than --min-side commits after it, leaves the window mixed)
                since_previous = change(_median(s["values"][-2]), a, mode)
                if verdict(since_previous, s["higher_is_better"], tol) != "regression":
                    v = "continues an earlier change"
                elif testable and p > alpha + 1e-12:
                    v = "within noise"
            newest.append({**row, "previous_commits": len(s["points"]) - 1 - start, "before_median": b,
                           "newest_median": a, "change": size, "p": p, "test": test, "verdict": v})
        noise.append(_noise_row(quantity, s, bounds, mode, tol))
    return (pd.DataFrame(steps, columns=["quantity", "kind", "first_commit", "describe", "subject", "previous_commit",
                                         "before_median", "after_median", "change", "mode", "tolerance", "p", "p_adj",
                                         "splits", "verdict"]),
            pd.DataFrame(newest, columns=["quantity", "kind", "commit", "previous_commits", "before_median",
                                          "newest_median", "change", "mode", "tolerance", "p", "test", "verdict"]),
            pd.DataFrame(noise, columns=["quantity", "kind", "points", "values", "records", "repeat_spread",
                                         "record_deviation_p90", "record_deviation_max", "mode", "tolerance"]))


def _noise_row(quantity: str, s: dict, bounds: list[int], mode: str, tol: float) -> dict:
    """How much a quantity moves without a change of code: the spread of a point's values (repeats, or
    seeds) and how far one record's median strays from the median of its segment (between steps)."""
    spreads, deviations = [], []
    for i, values in enumerate(s["values"]):
        v = values[np.isfinite(values)]
        if v.size >= 2:
            mid = float(np.median(v))
            spreads.append((v.max() - v.min()) / abs(mid) if mode == "rel" and mid else v.max() - v.min())
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        segment = _median(np.concatenate(s["values"][lo:hi]))
        if sum(len(s["records"][p]) for p in s["points"][lo:hi]) < 2:
            continue  # one record is its own median
        for p in s["points"][lo:hi]:
            for m in s["records"][p]:
                if np.isfinite(m) and np.isfinite(segment):
                    deviations.append(abs(m / segment - 1) if mode == "rel" and segment else abs(m - segment))
    return {"quantity": quantity, "kind": s["kind"], "points": len(s["points"]),
            "values": int(sum(v.size for v in s["values"])), "records": len(deviations),
            "repeat_spread": float(np.median(spreads)) if spreads else math.nan,
            "record_deviation_p90": float(np.percentile(deviations, 90)) if deviations else math.nan,
            "record_deviation_max": float(max(deviations)) if deviations else math.nan, "mode": mode, "tolerance": tol}

