"""Linear speed-up: sub-optimality f(x̄) − f* against iterations per (task, method, n), iterations to a
target sub-optimality with an explicit status, and the speed-up T(n = 1) / T(n) with a bootstrap interval.

Every method is plain SGD on one worker, so a method's baseline is its own n = 1 runs, or the n = 1
all-reduce runs when it has none. The default target is twice the n = 1 noise floor: a constant LR
leaves SGD at a floor that shrinks as 1/n, so a target under the n = 1 floor is never reached at n = 1.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.figures import method_label, method_sort_key, usable
from analysis.tta import CENSORED, DIVERGED, REACHED, first_crossing, summarize_seeds

METRIC = "train_subopt"
TARGET_FACTOR = 2.0  # default target = TARGET_FACTOR × the n = 1 floor
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
    return data


def curves(points: pd.DataFrame) -> pd.DataFrame:
    """One row per (task, method, nodes, step): median, min and max of the sub-optimality over seeds."""
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


def default_target(points: pd.DataFrame, task: str) -> tuple[float, str]:
    """TARGET_FACTOR × the median n = 1 floor of ``task`` (all-reduce runs first, else any n = 1 run)."""
    one = points[(points["task"] == task) & (points["nodes"] == 1)]
    source = "n = 1 all-reduce"
    if (one["algorithm"] == "allreduce").any():
        one = one[one["algorithm"] == "allreduce"]
    else:
        source = "n = 1"
    if one.empty:
        return math.nan, "none (no n = 1 run)"
    floors = one.sort_values("step").groupby("run_id")[METRIC].apply(floor_of)
    return TARGET_FACTOR * float(floors.median()), f"{TARGET_FACTOR:g} x median floor of {source}"


def per_run(points: pd.DataFrame, targets: dict[str, float]) -> pd.DataFrame:
    """One row per run: its steps to the target of its task, the crossing status and its floor."""
    rows = []
    for run_id, pts in points.groupby("run_id", sort=False):
        pts = pts.sort_values("step")
        first = pts.iloc[0]
        hit = first_crossing(pts["step"], pts[METRIC], targets[first["task"]], increasing=False)
        missed = DIVERGED if first["status"] == "diverged" else CENSORED
        rows.append({"run_id": run_id, "task": first["task"], "method": first["method"],
                     "algorithm": first["algorithm"], "nodes": int(first["nodes"]), "seed": first["seed"],
                     "status": first["status"], "tta_status": REACHED if hit.reached else missed,
                     "steps_to_target": hit.x, "floor": floor_of(pts[METRIC])})
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


def speedup_table(points: pd.DataFrame, target: float | None = None, n_boot: int = 2000) -> pd.DataFrame:
    """One row per (task, method, n): target, seeds reached, median steps to target [bootstrap CI],
    speed-up over the n = 1 baseline [CI], the floor (median over seeds) and floor(n = 1) / floor(n)."""
    targets = {}
    for task in points["task"].unique():
        targets[task] = (float(target), "given") if target is not None else default_target(points, task)
    runs = per_run(points, {task: value for task, (value, _) in targets.items()})
    rows = []
    for (task, method, nodes), g in runs.groupby(["task", "method", "nodes"]):
        base = runs[(runs["task"] == task) & (runs["method"] == method) & (runs["nodes"] == 1)]
        if base.empty:
            base = runs[(runs["task"] == task) & (runs["algorithm"] == "allreduce") & (runs["nodes"] == 1)]
        steps, steps_lo, steps_hi = summarize_seeds(g["steps_to_target"], n_boot=n_boot)
        status = _status(base, g, steps)
        speedup = lo = hi = math.nan
        if status == REACHED:
            speedup, lo, hi = ratio_interval(base["steps_to_target"], g["steps_to_target"], n_boot)
        floor = float(g["floor"].median())
        rows.append({"task": task, "method": method, "nodes": nodes, "target": targets[task][0],
                     "target_source": targets[task][1], "seeds": len(g),
                     "reached": int((g["tta_status"] == REACHED).sum()), "steps_to_target": steps,
                     "steps_ci_low": steps_lo, "steps_ci_high": steps_hi, "speedup": speedup,
                     "speedup_ci_low": lo, "speedup_ci_high": hi, "status": status, "floor": floor,
                     "floor_ratio": float(base["floor"].median()) / floor if len(base) and floor > 0 else math.nan})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    order = table["method"].map(method_sort_key)
    return table.assign(_o=order).sort_values(["task", "_o", "nodes"]).drop(columns="_o").reset_index(drop=True)


def _interval(value: float, lo: float, hi: float, fmt: str = "{:.3g}") -> str:
    if not math.isfinite(value):
        return "inf" if value == math.inf else "—"
    return f"{fmt.format(value)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def speedup_markdown(table: pd.DataFrame) -> str:
    shown = pd.DataFrame({
        "task": table["task"], "method": table["method"], "n": table["nodes"],
        "reached": [f"{r}/{s}" for r, s in zip(table["reached"], table["seeds"])],
        "steps to target": [_interval(*v, "{:.0f}") for v in
                            zip(table["steps_to_target"], table["steps_ci_low"], table["steps_ci_high"])],
        "speed-up [95% CI]": [_interval(*v, "{:.2f}") for v in
                              zip(table["speedup"], table["speedup_ci_low"], table["speedup_ci_high"])],
        "ideal": table["nodes"], "status": table["status"],
        "floor": [f"{v:.3g}" for v in table["floor"]],
        "floor(1)/floor(n)": [f"{v:.3g}" for v in table["floor_ratio"]]})
    return shown.to_markdown(index=False) + "\n"


def speedup_section(points: pd.DataFrame | None) -> str | None:
    """The report's section, when the runs have a sub-optimality at n = 1 and at another n."""
    data = speedup_points(points)
    if data is None or not (data["nodes"] == 1).any() or data["nodes"].nunique() < 2:
        return None
    table = speedup_table(data)
    targets = "; ".join(f"{t}: {v:.3g} ({s})" for t, v, s in
                        table[["task", "target", "target_source"]].drop_duplicates().itertuples(index=False))
    return ("Iterations each method needs until the sub-optimality f(x̄) − f* of the averaged model first "
            f"falls to the target ({targets}; interpolated between evaluations), median over seeds with a "
            "95% bootstrap interval, and the speed-up T(n = 1) / T(n) (ideal: n). `floor` is the median "
            "sub-optimality over the last quarter of the run; the theory's leading term O(1/√(nT)) predicts "
            "that the floor shrinks with n. Also in [speedup.csv](speedup.csv).\n\n" + speedup_markdown(table))


def write_speedup_csv(points: pd.DataFrame | None, run_dir: Path) -> Path | None:
    import os

    data = speedup_points(points)
    if data is None or not (data["nodes"] == 1).any():
        return None
    path = Path(run_dir) / "speedup.csv"
    tmp = path.with_name(f".{path.name}.tmp")
    speedup_table(data).to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path
