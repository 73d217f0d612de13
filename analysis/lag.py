"""Why decentralized training lags centralized training: the consensus distance each run keeps
during training against its final accuracy gap to all-reduce SGD, with a fitted power law
gap = a · Ξ^b across node counts, topologies and methods, and a rank correlation."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.display import as_percent
from analysis.files import write_atomically
from analysis.labels import method_label
from analysis.report_html import md_text, names_as_text
from analysis.selection import REFERENCE, one_cell_per, usable
from analysis.summary import spectral_fit

SETTING = ["task", "data", "algorithm", "compressor", "topology", "nodes"]
LAG_COLUMNS = SETTING + ["method", "spectral_gap", "seeds", "diverged", "consensus", "allreduce_acc", "acc",
                         "gap"]
FIT_COLUMNS = ["task", "data", "scope", "n", "n_dropped", "slope", "slope_ci_low", "slope_ci_high",
               "a", "a_ci_low", "a_ci_high", "r2", "spearman", "spearman_p", "n_ranked", "k_decade", "k_ci_low",
               "k_ci_high", "level"]


def training_consensus(points: pd.DataFrame) -> pd.Series:
    """Ξ of each run (index run_id): the time-average over the second half of training of the
    consensus distance (1/n) Σ‖x_i − x̄‖², as the runner records it (summed over all parameters,
    not normalised). The second half, because the first is a transient (large early gradients;
    Choco's public copies start at 0) while the final accuracy reflects where the workers settle.
    Trapezoids over epochs, so an uneven evaluation cadence does not weight some points more."""
    out = {}
    for run_id, g in points[points["step"] > 0].groupby("run_id", sort=False):
        g = g[np.isfinite(g["consensus_distance"].astype(float))].sort_values("epoch")
        late = g[g["epoch"] >= g["epoch"].max() / 2.0] if len(g) else g
        x, y = late["epoch"].to_numpy(float), late["consensus_distance"].to_numpy(float)
        if len(late) >= 2 and x[-1] > x[0]:
            out[run_id] = float(np.trapezoid(y, x) / (x[-1] - x[0]))
        else:
            out[run_id] = float(y.mean()) if len(y) else math.nan
    return pd.Series(out, name="consensus", dtype=float)


def lag_table(points: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """One row per decentralized setting (task, data, method, topology, n): Ξ and the final accuracy
    gap to all-reduce at the same task, data and n (percentage points), each the median over the
    seeds that did not diverge. Where a setting was run at several network presets or LRs, the
    most-run cell is kept (a preset changes time, not training)."""
    runs = usable(summary)
    runs = runs.assign(acc=as_percent(runs["final_test_acc"]).to_numpy())
    runs = one_cell_per(runs, SETTING)
    alive = runs[runs["status"] != "diverged"]
    ref_runs = alive[alive["algorithm"] == REFERENCE]
    reference = {k: float(g["acc"].median()) for k, g in ref_runs.groupby(["task", "data", "nodes"], dropna=False)}
    xi = training_consensus(points[points["run_id"].isin(set(runs["run_id"]))]) if len(runs) else pd.Series()
    rows = []
    for key, g in runs[runs["algorithm"] != REFERENCE].groupby(SETTING, dropna=False, sort=True):
        ok = g[g["status"] != "diverged"]
        ref = reference.get((key[0], key[1], key[5]), math.nan)
        acc = float(ok["acc"].median()) if len(ok) else math.nan
        rows.append({**dict(zip(SETTING, key)), "method": method_label(key[2], key[3]),
                     "spectral_gap": float(g["spectral_gap"].median()), "seeds": len(g),
                     "diverged": int((g["status"] == "diverged").sum()),
                     "consensus": float(xi.reindex(ok["run_id"]).median()) if len(ok) else math.nan,
                     "allreduce_acc": ref, "acc": acc, "gap": ref - acc})
    return pd.DataFrame(rows, columns=LAG_COLUMNS)


def fit_lag(table: pd.DataFrame, level: float = 0.95) -> dict:
    """Least squares of log gap = log a + b log Ξ with t-intervals on b and on a, the quantities
    for the confidence band of the fitted line, and Spearman's rank correlation of gap and Ξ.

    Settings with a gap ≤ 0 cannot enter the log fit (``n_dropped``) but do count in the rank
    correlation, which needs no logarithm."""
    from scipy import stats  # imported where used: 0.5 s a process
    fit = spectral_fit(table, y="gap", x="consensus", level=level)
    x = pd.to_numeric(table["consensus"], errors="coerce").to_numpy(float)
    y = pd.to_numeric(table["gap"], errors="coerce").to_numpy(float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log(x[keep]), np.log(y[keep])
    n = fit["n"]
    resid = ly - (fit["intercept"] + fit["slope"] * lx)
    dof = n - 2
    s = float(np.sqrt((resid ** 2).sum() / dof)) if dof > 0 else math.nan
    t = float(stats.t.ppf(0.5 + level / 2.0, dof)) if dof > 0 else math.inf
    sxx = float(((lx - lx.mean()) ** 2).sum())
    half = t * s * math.sqrt(1.0 / n + lx.mean() ** 2 / sxx) if dof > 0 else math.inf
    ranked = np.isfinite(x) & np.isfinite(y) & (x > 0)
    rho, p = (stats.spearmanr(x[ranked], y[ranked]) if ranked.sum() >= 3 else (math.nan, math.nan))
    return {**fit, "a": math.exp(fit["intercept"]), "a_ci_low": math.exp(fit["intercept"] - half),
            "a_ci_high": math.exp(fit["intercept"] + half), "resid_std": s, "t": t, "mean_log_x": float(lx.mean()),
            "sxx": sxx, "spearman": float(rho), "spearman_p": float(p), "n_ranked": int(ranked.sum()),
            **semilog_fit(x[ranked], y[ranked], level)}


def semilog_fit(x, y, level: float = 0.95) -> dict:
    """gap = c + k·log10 Ξ over every setting, gaps ≤ 0 included: the log fit has to drop those, which
    biases it when many gaps are near zero; k (pp per decade of Ξ) with its t-interval."""
    from scipy import stats  # imported where used: 0.5 s a process
    if len(x) < 3 or np.unique(x).size < 2:
        return {"k_decade": math.nan, "k_ci_low": math.nan, "k_ci_high": math.nan}
    fit = stats.linregress(np.log10(x), y)
    half = stats.t.ppf(0.5 + level / 2.0, len(x) - 2) * fit.stderr
    return {"k_decade": float(fit.slope), "k_ci_low": float(fit.slope - half), "k_ci_high": float(fit.slope + half)}


def fit_band(fit: dict, xs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fitted gap a·Ξ^b at ``xs`` and its pointwise confidence band (of the mean, not of a new
    point), back-transformed from the log scale."""
    lx = np.log(np.asarray(xs, dtype=float))
    centre = fit["intercept"] + fit["slope"] * lx
    if not math.isfinite(fit["t"]):
        return np.exp(centre), np.full_like(lx, np.nan), np.full_like(lx, np.nan)
    half = fit["t"] * fit["resid_std"] * np.sqrt(1.0 / fit["n"] + (lx - fit["mean_log_x"]) ** 2 / fit["sxx"])
    return np.exp(centre), np.exp(centre - half), np.exp(centre + half)


def lag_fits(table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per (task, data): one fit over every decentralized method pooled (scope "all methods"), and
    one per method that has >= 3 settings at >= 2 distinct Ξ. A group that cannot be fitted says why."""
    rows = []
    for (task, scheme), g in table.groupby(["task", "data"], dropna=False, sort=True):
        scopes = [("all methods", g)] + [(m, h) for m, h in g.groupby("method", sort=True)
                                         if g["method"].nunique() > 1 and len(h) >= 3]
        for scope, h in scopes:
            row = {"task": task, "data": scheme, "scope": scope, "level": level}
            try:
                fit = fit_lag(h, level)
            except ValueError as err:
                rows.append({**row, "n": int(h["gap"].notna().sum()), "note": str(err)})
                continue
            rows.append({**row, **{k: fit[k] for k in ("n", "n_dropped", "slope", "a", "a_ci_low", "a_ci_high",
                                                       "r2", "spearman", "spearman_p", "n_ranked", "k_decade",
                                                       "k_ci_low", "k_ci_high")},
                         "slope_ci_low": fit["ci_low"], "slope_ci_high": fit["ci_high"], "note": ""})
    return pd.DataFrame(rows, columns=FIT_COLUMNS + ["note"])


def fits_markdown(fits: pd.DataFrame) -> str:
    def interval(lo, hi, fmt):
        return f"[{lo:{fmt}}, {hi:{fmt}}]" if math.isfinite(lo) and math.isfinite(hi) else "(2 points: none)"

    rows = []
    for _, f in fits.iterrows():
        base = {"task": md_text(f["task"]), "data": md_text(f["data"]), "methods": md_text(f["scope"])}
        if f["note"]:
            rows.append({**base, "b [95% CI]": f"no fit: {f['note']}"})
            continue
        rows.append({**base, "b [95% CI]": f"{f['slope']:.2f} {interval(f['slope_ci_low'], f['slope_ci_high'], '.2f')}",
                     "a [95% CI]": f"{f['a']:.3g} {interval(f['a_ci_low'], f['a_ci_high'], '.3g')}",
                     "R²": f"{f['r2']:.2f}", "settings": int(f["n"]), "gap ≤ 0 (not fitted)": int(f["n_dropped"]),
                     "Spearman ρ (p), all": f"{f['spearman']:.2f} ({f['spearman_p']:.2g})",
                     "k pp/decade [95% CI], all": f"{f['k_decade']:.2f} "
                     f"{interval(f['k_ci_low'], f['k_ci_high'], '.2f')}" if math.isfinite(f["k_decade"]) else "—"})
    return pd.DataFrame(rows).astype(object).fillna("").to_markdown(index=False) + "\n"


def table_markdown(table: pd.DataFrame) -> str:
    shown = table.sort_values(["task", "data", "method", "topology", "nodes"])[
        ["method", "data", "topology", "nodes", "spectral_gap", "seeds", "diverged", "consensus", "gap"]]
    shown = shown.rename(columns={"nodes": "n", "spectral_gap": "ρ", "consensus": "Ξ (2nd half)",
                                  "gap": "gap to all-reduce (pp)"})
    shown = names_as_text(shown, ["method", "data", "topology"])
    return shown.to_markdown(index=False, floatfmt=".3g") + "\n"


def lag_section(points: pd.DataFrame | None, summary: pd.DataFrame) -> str | None:
    """report.md's section, when some (task, data) has a fit."""
    if points is None or "consensus_distance" not in points:
        return None
    table = lag_table(points, summary)
    fits = lag_fits(table)
    if fits.empty or (fits["note"] != "").all():
        return None
    return ("Ξ: time-average over the second half of training of the consensus distance (1/n) Σ‖xᵢ − x̄‖² "
            "(summed over parameters); gap: all-reduce SGD's final test accuracy at the same task, data and n "
            "minus the method's (percentage points); both medians over seeds that did not diverge. Fit: least "
            "squares of log gap = log a + b·log Ξ across n, topologies and methods, t-intervals at 95 %; "
            "Spearman's ρ and the semi-log fit gap = c + k·log₁₀ Ξ (k in pp per decade) also count the settings "
            "with gap ≤ 0, which the log fit must drop. Theory: the consensus distance enters the "
            "convergence bounds of decentralized SGD additively (through L²·Ξ), and it grows as the spectral "
            "gap shrinks (Choco-SGD: n/(ρ⁴δ²T)), so b > 0 is expected; a linear effect would give b ≈ 1. "
            "Tables: [lag.csv](lag.csv), [lag_fits.csv](lag_fits.csv).\n\n"
            + fits_markdown(fits) + "\n" + table_markdown(table))


def write_tables(run_dir: Path, points: pd.DataFrame | None, summary: pd.DataFrame) -> list[Path]:
    """DIR/lag.csv (one row per setting) and DIR/lag_fits.csv, when there are decentralized runs."""
    if points is None or "consensus_distance" not in points:
        return []
    table = lag_table(points, summary)
    if table.empty:
        return []
    written = []
    for name, frame in (("lag.csv", table), ("lag_fits.csv", lag_fits(table))):
        written.append(write_atomically(Path(run_dir) / name, lambda tmp, f=frame: f.to_csv(tmp, index=False)))
    return written
