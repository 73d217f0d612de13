"""Linear speed-up: sub-optimality f(x̄) − f* against iterations per (task, LR regime, method, n), iterations
to target sub-optimalities with an explicit status, and the speed-up T(n = 1) / T(n) with a bootstrap interval.

Every method is plain SGD on one worker, so a method's baseline is its own n = 1 runs, or the n = 1
all-reduce runs when it has none. A run's LR regime is read off its LR against the n = 1 LR η₁: `constant`
(η = η₁) or `√n` (η₁ < η ≤ η₁·√n, the theory's η ∝ √(n/T), a value under η₁·√n being a stability cap).
The n = 1 runs at η₁ belong to every regime: they are the shared baseline, counted once per regime.
The default targets are multiples of the n = 1 noise floor: a constant LR leaves SGD at a floor, so a
target under the n = 1 floor is never reached at n = 1.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.files import write_atomically
from analysis.labels import method_label, method_sort_key
from analysis.report_html import md_text
from analysis.selection import REFERENCE, usable
from analysis.tta import CENSORED, DIVERGED, REACHED, first_crossing, summarize_seeds

METRIC = "train_subopt"
TARGET_FACTORS = (2.0, 1.25)  # default targets = factor × the n = 1 floor: the transient, then near the floor
CONSTANT, SQRT_N, SHARED = "constant", "√n", "n = 1 (shared)"
LR_RTOL = 1e-6  # LRs come from YAML decimals: equal up to rounding
TAIL = 0.25  # a run's floor: median of the metric over the last quarter of its evaluation points
BASELINE_CENSORED, NO_BASELINE = "baseline censored", "no n = 1 run"


def speedup_points(points: pd.DataFrame | None) -> pd.DataFrame | None:
    """The evaluation points usable for the study (finished runs of tasks with a sub-optimality,
    with a ``method`` label), or None when there are none."""
    if points is None or points.empty or METRIC not in points:
        return None
    data = usable(points)
    data = data[data.groupby("run_id")[METRIC].transform(lambda s: s.notna().any())]
    if data.empty:
        return None
    data = data.copy()
    data["method"] = [method_label(a, c) for a, c in zip(data["algorithm"], data["compressor"].astype(str))]
    # the configured LR of each run (points' own ``lr`` is the schedule's value at each evaluation)
    data["lr"] = data["lr_config"] if "lr_config" in data else data.get("lr", math.nan)
    data["lr_regime"] = lr_regimes(data)
    return data


def lr_regime(lr: float, lr1: float, nodes: int) -> str:
    """The regime of a run at ``nodes`` workers and LR ``lr`` given the n = 1 LR ``lr1``: SHARED at n = 1
    with η₁, CONSTANT for η₁ at n > 1, SQRT_N for η₁ < η ≤ η₁·√n (below η₁·√n: capped for stability),
    anything else named by its LR (no baseline regime of its own, still compared with the n = 1 runs)."""
    if not (math.isfinite(lr) and math.isfinite(lr1)):
        return SHARED if nodes == 1 else CONSTANT  # no LR recorded: one regime, as before the LR study
    if math.isclose(lr, lr1, rel_tol=LR_RTOL):
        return SHARED if nodes == 1 else CONSTANT
    if nodes > 1 and lr1 < lr <= lr1 * math.sqrt(nodes) * (1 + LR_RTOL):
        return SQRT_N
    return f"η = {lr:g}"


def lr_regimes(points: pd.DataFrame) -> pd.Series:
    """``lr_regime`` of every evaluation point, η₁ being the most common LR of the task's n = 1 runs
    (the smallest of equally common ones)."""
    runs = points.drop_duplicates("run_id")
    lr1 = runs[runs["nodes"] == 1].groupby("task")["lr"].agg(lambda s: s.mode().min() if s.notna().any() else math.nan)
    by_run = {r.run_id: lr_regime(float(r.lr), float(lr1.get(r.task, math.nan)), int(r.nodes))
              for r in runs.itertuples(index=False)}
    return points["run_id"].map(by_run)


def regimes(points: pd.DataFrame) -> list[str]:
    """The regimes with runs beyond n = 1, constant first, then √n, then any other LR."""
    found = set(points.loc[points["lr_regime"] != SHARED, "lr_regime"]) or {CONSTANT}
    return sorted(found, key=lambda r: ({CONSTANT: 0, SQRT_N: 1}.get(r, 2), r))


def in_regime(points: pd.DataFrame, regime: str) -> pd.DataFrame:
    """The runs of ``regime`` with the shared n = 1 baseline (unless the regime has n = 1 runs of its own
    in that task), each run once."""
    own = points["lr_regime"] == regime
    own_baseline = set(points.loc[own & (points["nodes"] == 1), "task"])
    return points[own | ((points["lr_regime"] == SHARED) & ~points["task"].isin(own_baseline))]


def curves(points: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, method, nodes, step): median, min and max of the sub-optimality over seeds
    (of one regime: pass ``in_regime(points, regime)``)."""
    grouped = points.groupby(["task", "method", "nodes", "step"])[METRIC]
    out = grouped.agg(median="median", low="min", high="max", seeds="count").reset_index()
    return out.sort_values(["task", "method", "nodes", "step"], ignore_index=True)


def floor_of(values) -> float:
    """Median of the last TAIL of a run's values (at least one point): the level SGD settles at."""
    v = np.asarray(values, dtype=float)
    return float(np.median(v[-max(1, math.ceil(TAIL * len(v))):])) if len(v) else math.nan


def fit_theory_constant(steps, values, tail: float = 0.5) -> float:
    """c of the leading term c/√t, least squares in log space over the last ``tail`` of the points
    with t > 0 (the slope fixed at −1/2): log c = mean(log f + ½ log t)."""
    t, f = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    keep = (t > 0) & (f > 0) & np.isfinite(f)
    t, f = t[keep], f[keep]
    if not len(t):
        return math.nan
    t, f = t[-max(1, math.ceil(tail * len(t))):], f[-max(1, math.ceil(tail * len(t))):]
    return float(np.exp(np.mean(np.log(f) + 0.5 * np.log(t))))


def default_target(points: pd.DataFrame, task: str, factor: float = TARGET_FACTORS[0]) -> tuple[float, str]:
    """``factor`` × the median n = 1 floor of ``task`` (all-reduce runs first, else any n = 1 run; the
    shared n = 1 LR when the runs carry regimes)."""
    one = points[(points["task"] == task) & (points["nodes"] == 1)]
    if "lr_regime" in one:
        one = one[one["lr_regime"] == SHARED]
    source = "n = 1 all-reduce"
    if (one["algorithm"] == REFERENCE).any():
        one = one[one["algorithm"] == REFERENCE]
    else:
        source = "n = 1"
    if one.empty:
        return math.nan, "none (no n = 1 run)"
    floors = one.sort_values("step").groupby("run_id")[METRIC].apply(floor_of)
    return factor * float(floors.median()), f"{factor:g} x median floor of {source}"


def per_run(points: pd.DataFrame, targets: dict[str, float]) -> pd.DataFrame:
    """One row per run: its LR and regime, steps to the target of its task, the crossing status, its floor."""
    rows = []
    for run_id, pts in points.groupby("run_id", sort=False):
        pts = pts.sort_values("step")
        first = pts.iloc[0]
        hit = first_crossing(pts["step"], pts[METRIC], targets[first["task"]], increasing=False)
        missed = DIVERGED if first["status"] == "diverged" else CENSORED
        rows.append({"run_id": run_id, "task": first["task"], "lr_regime": first["lr_regime"],
                     "lr": float(first["lr"]), "method": first["method"], "algorithm": first["algorithm"],
                     "nodes": int(first["nodes"]), "seed": first["seed"], "status": first["status"],
                     "tta_status": REACHED if hit.reached else missed, "steps_to_target": hit.x,
                     "floor": floor_of(pts[METRIC])})
    return pd.DataFrame(rows)


def ratio_interval(base, other, n_boot: int = 2000, level: float = 0.95, seed: int = 0):
    """median(base) / median(other) and a percentile-bootstrap interval, resampling the seeds of both
    sides independently. An unreached side (inf) makes the ratio 0 or inf; inf / inf is dropped."""
    b, o = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        point = float(np.median(b) / np.median(o))
        rng = np.random.default_rng(seed)
        boot = (np.median(rng.choice(b, size=(n_boot, b.size)), axis=1)
                / np.median(rng.choice(o, size=(n_boot, o.size)), axis=1))
    boot = np.sort(boot[~np.isnan(boot)])
    if not boot.size:
        return point, math.nan, math.nan
    alpha = (1.0 - level) / 2.0
    lo = float(boot[int(math.floor(alpha * (boot.size - 1)))])
    hi = float(boot[int(math.ceil((1.0 - alpha) * (boot.size - 1)))])
    # with few seeds the bootstrap is lumpy; the interval must still hold the point estimate
    return (point, lo, hi) if math.isnan(point) else (point, min(lo, point), max(hi, point))


def _status(baseline: pd.DataFrame, group: pd.DataFrame, median_steps: float) -> str:
    if baseline.empty:
        return NO_BASELINE
    if not math.isfinite(float(baseline["steps_to_target"].median())):
        return BASELINE_CENSORED
    if math.isfinite(median_steps):
        return REACHED
    return DIVERGED if (group["tta_status"] == DIVERGED).sum() * 2 >= len(group) else CENSORED


def _targets(points: pd.DataFrame, target: float | None, factors) -> list[tuple[float, dict]]:
    """(factor, {task: (value, source)}) per target: the given one (factor NaN) or one per factor."""
    tasks = points["task"].unique()
    if target is not None:
        return [(math.nan, {task: (float(target), "given") for task in tasks})]
    return [(f, {task: default_target(points, task, f) for task in tasks}) for f in factors]


def speedup_table(points: pd.DataFrame, target: float | None = None, n_boot: int = 2000,
                  factors=TARGET_FACTORS) -> pd.DataFrame:
    """One row per (task, LR regime, method, n, target): seeds reached, median steps to target [bootstrap
    CI], speed-up over the n = 1 baseline of the regime [CI], the floor (median over seeds) and
    floor(n = 1) / floor(n). The shared n = 1 runs appear once in every regime (``shared`` is True)."""
    rows = []
    for factor, targets in _targets(points, target, factors):
        all_runs = per_run(points, {task: value for task, (value, _) in targets.items()})
        for regime in regimes(all_runs):
            runs = in_regime(all_runs, regime)
            for (task, method, nodes), g in runs.groupby(["task", "method", "nodes"]):
                ones = runs[(runs["task"] == task) & (runs["nodes"] == 1)]
                base = ones[ones["method"] == method]
                if base.empty:
                    base = ones[ones["algorithm"] == REFERENCE]
                steps, steps_lo, steps_hi = summarize_seeds(g["steps_to_target"], n_boot=n_boot)
                status = _status(base, g, steps)
                speedup = lo = hi = math.nan
                if status == REACHED:
                    speedup, lo, hi = ratio_interval(base["steps_to_target"], g["steps_to_target"], n_boot)
                floor = float(g["floor"].median())
                rows.append({
                    "task": task, "lr_regime": regime, "method": method, "nodes": nodes,
                    "lr": float(g["lr"].median()), "shared": bool((g["lr_regime"] == SHARED).all()),
                    "target_factor": factor, "target": targets[task][0], "target_source": targets[task][1],
                    "seeds": len(g), "reached": int((g["tta_status"] == REACHED).sum()),
                    "steps_to_target": steps, "steps_ci_low": steps_lo, "steps_ci_high": steps_hi,
                    "speedup": speedup, "speedup_ci_low": lo, "speedup_ci_high": hi, "status": status,
                    "floor": floor,
                    "floor_ratio": float(base["floor"].median()) / floor if len(base) and floor > 0 else math.nan})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    order = dict(zip(regimes(points), range(len(points))))
    table = table.assign(_r=table["lr_regime"].map(order), _m=table["method"].map(method_sort_key),
                         _f=-table["target_factor"].fillna(0))
    return (table.sort_values(["task", "_r", "_m", "nodes", "_f"]).drop(columns=["_r", "_m", "_f"])
            .reset_index(drop=True))


def regime_title(regime: str, table: pd.DataFrame) -> str:
    lr1 = table.loc[table["nodes"] == 1, "lr"].median()
    if regime == CONSTANT:
        return f"constant LR: η = η₁ = {lr1:.3g} at every n"
    if regime == SQRT_N:
        return f"LR growing as √n: η = η₁·√n (η₁ = {lr1:.3g}), lower where capped for stability"
    return f"LR {regime} at n > 1"


def _interval(value: float, lo: float, hi: float, fmt: str = "{:.3g}") -> str:
    if not math.isfinite(value):
        return "inf" if value == math.inf else "—"
    return f"{fmt.format(value)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def _speedup_cell(row) -> str:
    if math.isfinite(row["speedup"]):
        return _interval(row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"], "{:.2f}")
    return row["status"]


def speedup_markdown(table: pd.DataFrame) -> str:
    """One table per (task, regime): one line per (method, n), the targets side by side."""
    out = []
    for (task, regime), t in table.groupby(["task", "lr_regime"], sort=False):
        keys = ["method", "nodes"]
        shown = t.drop_duplicates(keys)[keys + ["lr", "shared", "floor", "floor_ratio"]].reset_index(drop=True)
        shown = pd.DataFrame({"method": [md_text(m) for m in shown["method"]], "n": shown["nodes"],
                              "η": [f"{v:.3g}" + (" (shared)" if s else "")
                                    for v, s in zip(shown["lr"], shown["shared"])],
                              "floor": [f"{v:.3g}" for v in shown["floor"]],
                              "floor(1)/floor(n)": [f"{v:.3g}" for v in shown["floor_ratio"]]})
        for (factor, value), f in t.groupby(["target_factor", "target"], sort=False, dropna=False):
            name = f"{factor:g}× floor" if math.isfinite(factor) else f"{value:.3g}"
            f = f.reset_index(drop=True)
            shown[f"steps to {name} (reached)"] = [
                _interval(*v, "{:.0f}") + f" ({r}/{n})" for v, r, n in
                zip(zip(f["steps_to_target"], f["steps_ci_low"], f["steps_ci_high"]), f["reached"], f["seeds"])]
            shown[f"speed-up to {name} [95% CI]"] = [_speedup_cell(r) for _, r in f.iterrows()]
        out.append(f"### {md_text(task)}: {regime_title(regime, t)}\n\n" + shown.to_markdown(index=False) + "\n")
    return "\n".join(out)


def speedup_pivot_markdown(table: pd.DataFrame) -> str:
    """speedup_table's rows at its first target as one line per (task, regime, method) and a column per n > 1: the
    speed-up [95% CI] (or why none), the floor's fall floor(1)/floor(n) ("floor ÷"), and the LR."""
    first = table[(table["target_factor"] == table["target_factor"].max()) & (table["nodes"] > 1)]
    rows = {}
    for _, r in first.iterrows():
        row = rows.setdefault((r["task"], r["lr_regime"], r["method"]), {
            "task": md_text(r["task"]), "LR regime": r["lr_regime"], "method": md_text(r["method"])})
        row[f"n = {r['nodes']}: speed-up to {r['target_factor']:g}× floor"] = (
            f"{_speedup_cell(r)}; floor ÷{r['floor_ratio']:.3g}; η {r['lr']:.3g}")
    out = pd.DataFrame(list(rows.values())).fillna("—")
    out = out.drop(columns=["task"] * (out["task"].nunique() == 1))
    return out.to_markdown(index=False, disable_numparse=True) + "\n"


def speedup_section(points: pd.DataFrame | None) -> str | None:
    """The report's section, when the runs have a sub-optimality at n = 1 and at another n."""
    data = speedup_points(points)
    if data is None or not (data["nodes"] == 1).any() or data["nodes"].nunique() < 2:
        return None
    table = speedup_table(data)
    targets = "; ".join(f"{t}: {v:.3g} ({s})" for t, v, s in
                        table[["task", "target", "target_source"]].drop_duplicates().itertuples(index=False))
    return ("Iterations each method needs until the sub-optimality f(x̄) − f* of the averaged model first "
            f"falls to a target ({targets}; interpolated between evaluations), median over seeds with a "
            "95% bootstrap interval and the seeds that reached it, and the speed-up T(n = 1) / T(n) (ideal: "
            "n); a target missed by the median seed is named (censored, diverged), not given a number. One "
            "table per LR regime; the speed-up of a regime is over its n = 1 runs, which have the same LR in "
            "every regime and are the same runs (marked shared). `floor` is the median sub-optimality over "
            "the last quarter of the run; the theory's leading term O(1/√(nT)) predicts that it shrinks with "
            "n. Also in [speedup.csv](speedup.csv).\n\n" + speedup_markdown(table))


def write_speedup_csv(points: pd.DataFrame | None, run_dir: Path) -> Path | None:
    data = speedup_points(points)
    if data is None or not (data["nodes"] == 1).any():
        return None
    table = speedup_table(data)
    return write_atomically(Path(run_dir) / "speedup.csv", lambda tmp: table.to_csv(tmp, index=False))
