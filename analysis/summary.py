"""Per-run and per-cell conclusions: time/epochs/bits to a target accuracy, accuracy gap to
all-reduce, epoch gap, and the fitted power law of a quantity against the spectral gap."""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.busy import cell_share
from analysis.checks import read_table
from analysis.load import RUN_COLUMNS, Runs, load_runs
from analysis.selection import REFERENCE
from analysis.tta import AXES, CENSORED, DIVERGED, REACHED, increasing_metric, summarize_seeds, time_to_target

DEFAULT_TARGET_REL = 0.95  # the pipeline's target: 0.95 × the best all-reduce accuracy (load_tables)
METRIC_HINTS = {"test_acc", "test_loss", "train_loss", "train_loss_workers", "local_test_acc_mean",
                "consensus_distance", "test_ppl", "train_subopt"}
IDENTITY = ["cell", "run_id", "task", "data", "network", "algorithm", "compressor", "topology",
            "nodes", "seed", "status", "spectral_gap", "beta", "gamma", "delta_measured"]
# summary.csv: every run's row and what summarize adds to it (a best_<metric> column too, for another metric)
# a target per setting (task, data, n) where one study-wide target is out of all-reduce's reach at some n:
# R x all-reduce's best at that n (relative rule only); appended, so the columns before them are unchanged
SETTING_AXES = {"time_to_target_s": "time_to_setting_target_s", "epochs_to_target": "epochs_to_setting_target",
                "bits_to_target": "bits_to_setting_target"}
SETTING_COLUMNS = ["setting_target", *SETTING_AXES.values()]
RESULT_COLUMNS = ["target", "target_source", "metric", "tta_status", *AXES.values(), "mean_consensus_distance",
                  "allreduce_final_acc", "final_gap", *SETTING_COLUMNS]
SUMMARY_COLUMNS = [*RUN_COLUMNS, *RESULT_COLUMNS, "cell_others_cpu_share"]  # the last: analysis/busy.py
# columns added after summaries were written without them: such a summary still reads (the readers of the
# column say what is missing)
LATER_COLUMNS = {"n_eff", "compute_measured", "others_cpu_share", "cell_others_cpu_share", *SETTING_COLUMNS}
# what its readers take for granted of each column (checks.table_problem)
SUMMARY_KINDS = {
    "text": ["cell", "run_id", "status", "task", "algorithm", "compressor", "topology", "data", "network",
             "tta_status", "metric"],
    "filled": ["cell", "run_id", "status"],
    "whole": ["nodes", "seed"],
    "numbers": ["spectral_gap", "n_eff", "beta", "gamma", "lr", "epochs", "delta_measured", "final_test_acc", "best_test_acc",
                "final_local_acc", "final_consensus_distance", "bits_per_step", "paper_bits_per_step", "target",
                *AXES.values(), "allreduce_final_acc", "final_gap", *SETTING_COLUMNS],
}


def read_summary(path) -> pd.DataFrame:
    """A stored summary.csv (``python -m analysis summarize`` writes it), checked: one without a column its
    readers need, or with text where they read numbers, raises checks.DamagedFile naming the file and the
    column; a file that is not CSV at all raises pandas' error (a caller may compute the summary again)."""
    path = Path(path)
    return read_table(path, [c for c in SUMMARY_COLUMNS if c not in LATER_COLUMNS], f"python -m analysis summarize {path.parent}", **SUMMARY_KINDS)


def study_target(run_dir) -> tuple[dict, str]:
    """The target rule of the study at ``run_dir`` when a command is given none: the rule its ``summary.csv``
    was written with (``--target-rel R``: R x best all-reduce, recomputed on the runs now there; an absolute or
    per-task target: its values), else the pipeline's default, DEFAULT_TARGET_REL. (summarize's keyword
    arguments, where the rule came from.) Run by hand with no target, summarize once wrote NaN targets over
    the pipeline's, and the next figure job failed."""
    path = Path(run_dir) / "summary.csv"
    try:
        stored = read_summary(path) if path.is_file() else None
    except (OSError, ValueError):  # damaged: the command that reads it says so; here only a default is sought
        stored = None
    if stored is not None and len(stored) and "target_source" in stored:
        sources = set(stored["target_source"].dropna().astype(str))
        relative = {source.split(" x best", 1)[0] for source in sources}
        if len(relative) == 1 and all(" x best" in source for source in sources):
            try:
                return {"target_rel": float(relative.pop())}, f"{path}'s"
            except ValueError:
                pass
        if sources and sources <= {"absolute", "given per task"} and stored["target"].notna().all():
            per_task = {target_key(*_key(t, d)): float(v) for t, d, v in stored[["task", "data", "target"]].values}
            return {"target_acc": per_task}, f"{path}'s"
    return {"target_rel": DEFAULT_TARGET_REL}, "the pipeline's default"


def target_key(task, data) -> str:
    """Key of a per-(task, data) target in a mapping given as ``target_acc``."""
    return f"{task}|{data}"


def _key(*values) -> tuple:
    """A group's key as a lookup key: groupby(dropna=False) names a missing task or data NaN, a row None."""
    return tuple(None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values)


def _targets(runs: pd.DataFrame, target_acc, target_rel, metric: str) -> dict:
    """(task, data) -> (target, source)."""
    if target_acc is not None and target_rel is not None:
        raise ValueError("give either target_acc or target_rel, not both")
    groups = runs.groupby(["task", "data"], dropna=False, sort=False)
    out = {}
    for (task, data), g in groups:
        task, data = _key(task, data)
        if target_rel is None and not isinstance(target_acc, Mapping):
            out[(task, data)] = (math.nan, "none") if target_acc is None else (float(target_acc), "absolute")
        elif target_rel is None:
            value = target_acc.get(target_key(task, data))
            out[(task, data)] = (math.nan, "none") if value is None else (float(value), "given per task")
        else:
            best_col = f"best_{metric}"
            best = max if increasing_metric(metric) else min
            ref = g[g["algorithm"] == REFERENCE][best_col].dropna()
            source = f"{target_rel:g} x best all-reduce"
            if ref.empty:
                ref, source = g[best_col].dropna(), f"{target_rel:g} x best of any run (no all-reduce run)"
            out[(task, data)] = (target_rel * best(ref), source) if len(ref) else (math.nan, "none")
    return out


def _setting_targets(runs: pd.DataFrame, target_rel, metric: str) -> dict:
    """(task, data, nodes) -> R x all-reduce's best at that n; none without a relative rule or all-reduce there."""
    if target_rel is None:
        return {}
    ref = runs[runs["algorithm"] == REFERENCE]
    best = "max" if increasing_metric(metric) else "min"
    return {_key(*k): target_rel * float(g[f"best_{metric}"].agg(best))
            for k, g in ref.groupby(["task", "data", "nodes"], dropna=False) if g[f"best_{metric}"].notna().any()}


def _reference_final(runs: pd.DataFrame) -> dict:
    """(task, data, nodes) -> median over seeds of the all-reduce final accuracy."""
    ref = runs[runs["algorithm"] == REFERENCE]
    return {k: float(g["final_test_acc"].median()) for k, g in ref.groupby(["task", "data", "nodes"], dropna=False)}


def summarize(runs: Runs, target_acc=None, target_rel: float | None = None,
              metric: str = "test_acc") -> pd.DataFrame:
    """One row per run: identity, final/best accuracy, target and its crossing, consensus distance.

    ``target_acc``: a number, or a mapping ``target_key(task, data) -> number``;
    ``target_rel``: R × best all-reduce accuracy of the same task and data (``target_source``
    says when no all-reduce run existed and the best run of any algorithm was used)."""
    table = runs.runs.copy()
    if table.empty:
        return table
    if metric not in runs.points:
        numeric = sorted(c for c in runs.points.select_dtypes("number").columns if c in METRIC_HINTS)
        raise ValueError(f"unknown metric {metric!r}; the runs have {', '.join(numeric)}")
    best_col = f"best_{metric}"
    if best_col not in table:
        best = "max" if increasing_metric(metric) else "min"
        table[best_col] = table["run_id"].map(runs.points.groupby("run_id")[metric].agg(best))
    targets = _targets(table, target_acc, target_rel, metric)
    reference = _reference_final(table)
    per_setting = _setting_targets(table, target_rel, metric)
    rows = []
    for _, run in table.iterrows():
        pts = runs.points[runs.points["run_id"] == run["run_id"]].sort_values("step")
        target, source = targets[_key(run["task"], run["data"])]
        tta = time_to_target(pts, target, metric, status=run["status"])
        # at step 0 all workers start from the same model, so a distance of 0 there says nothing
        later = pts.loc[pts["step"] > 0, "consensus_distance"] if "consensus_distance" in pts else pd.Series(dtype=float)
        ref = reference.get((run["task"], run["data"], run["nodes"]), math.nan)
        setting = per_setting.get(_key(run["task"], run["data"], run["nodes"]), math.nan)
        at_setting = time_to_target(pts, setting, metric, status=run["status"])
        rows.append({"target": target, "target_source": source, "metric": metric, **tta, "setting_target": setting,
                     **{name: at_setting[axis] for axis, name in SETTING_AXES.items()},
                     "mean_consensus_distance": float(later.mean()) if later.notna().any() else math.nan,
                     "allreduce_final_acc": ref, "final_gap": ref - run["final_test_acc"]})
    extra = pd.DataFrame(rows, index=table.index, columns=RESULT_COLUMNS)
    return pd.concat([table, extra], axis=1).assign(cell_others_cpu_share=cell_share(table))


def cell_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: seeds, median and bootstrap CI of final accuracy and of the costs to the
    target, counts of run and target statuses."""
    rows = []
    for cell, g in summary.groupby("cell", sort=True, dropna=False):
        first = g.iloc[0]
        row = {c: first[c] for c in IDENTITY if c not in ("run_id", "seed", "status", "gamma", "delta_measured")}
        row.update({"cell": cell, "n_seeds": len(g), "target": first.get("target", math.nan),
                    "gamma": float(g["gamma"].median()), "delta_measured": float(g["delta_measured"].median()),
                    "bits_per_step": float(g["bits_per_step"].median()),
                    # the count bits_per_step and bits_to_target use (one per cell: the medium is in its network)
                    "bits_count": ",".join(sorted({str(c) for c in g.get("bits_count", pd.Series(["links"]))})),
                    "final_consensus_distance": float(g["final_consensus_distance"].median())})
        for col, name in [("final_test_acc", "final_acc"), ("best_test_acc", "best_acc"),
                          ("final_gap", "final_gap"), *[(c, c) for c in AXES.values()]]:
            if col in g:
                row[f"{name}_median"], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = summarize_seeds(g[col])
        for status in (REACHED, CENSORED, DIVERGED):
            row[f"n_{status}"] = int((g.get("tta_status") == status).sum()) if "tta_status" in g else 0
        row["statuses"] = ",".join(f"{s}={n}" for s, n in sorted(g["status"].value_counts().items()))
        rows.append(row)
    return pd.DataFrame(rows)


def epoch_gap(summary: pd.DataFrame) -> pd.DataFrame:
    """Epochs to target of each decentralized method vs all-reduce at the same task, data and n.

    ``gap_status``: "ok"; "method_unreached" (ratio and difference inf); "reference_unreached" or
    "no_reference" (ratio and difference NaN, as there is nothing to compare with). Where all-reduce never
    reaches the study-wide target at an n and the summary has the per-setting target (R x all-reduce's best
    at that n), that n's rows are read on it instead: ``target_rule`` "setting" (else "study")."""
    keys = ["task", "data", "topology", "nodes", "algorithm", "compressor"]
    ref = summary[summary["algorithm"] == REFERENCE]

    def per_seed(g: pd.DataFrame, column: str) -> pd.Series:
        """Epochs to target of each seed: runs of one seed that differ only in what epochs do not depend on
        (a network preset, the time model) are one seed, not several."""
        return g.groupby("seed")[column].median() if "seed" in g else g[column]

    def reference_at(g: pd.DataFrame, column: str = "epochs_to_target") -> tuple[float, int, str]:
        epochs = float(np.median(per_seed(g, column)))
        setting = pd.to_numeric(g.get("setting_target", pd.Series(dtype=float)), errors="coerce")
        if not math.isfinite(epochs) and setting.notna().any() and "epochs_to_setting_target" in g:
            return float(np.median(per_seed(g, "epochs_to_setting_target"))), len(per_seed(g, column)), "setting"
        return epochs, len(per_seed(g, column)), "study"

    ref_epochs = {k: reference_at(g) for k, g in ref.groupby(["task", "data", "nodes"], dropna=False)}
    rows = []
    for key, g in summary[summary["algorithm"] != REFERENCE].groupby(keys, sort=True, dropna=False):
        reference, ref_n, rule = ref_epochs.get((key[0], key[1], key[3]), (math.nan, 0, "study"))
        column, target = ("epochs_to_setting_target", "setting_target") if rule == "setting" else (
            "epochs_to_target", "target")
        seeds = per_seed(g, column)
        method = float(np.median(seeds))
        if ref_n == 0:
            status, ratio, diff = "no_reference", math.nan, math.nan
        elif not math.isfinite(reference):
            status, ratio, diff = "reference_unreached", math.nan, math.nan
        elif not math.isfinite(method):
            status, ratio, diff = "method_unreached", math.inf, math.inf
        else:
            status, diff = "ok", method - reference
            ratio = method / reference if reference > 0 else math.inf
        rows.append({**dict(zip(keys, key)), "target": float(g[target].iloc[0]), "n_seeds": len(seeds),
                     "epochs_to_target": method, "allreduce_epochs_to_target": reference,
                     "allreduce_n_seeds": ref_n, "epoch_ratio": ratio, "epoch_difference": diff,
                     "gap_status": status, "target_rule": rule})
    return pd.DataFrame(rows, columns=keys + ["target", "n_seeds", "epochs_to_target",
                                              "allreduce_epochs_to_target", "allreduce_n_seeds",
                                              "epoch_ratio", "epoch_difference", "gap_status", "target_rule"])


def spectral_fit(table: pd.DataFrame, y: str = "final_gap", x: str = "spectral_gap",
                 reference_slope: float | None = None, level: float = 0.95) -> dict:
    """Least-squares fit of log y = a + b log x, with a t-interval on the slope b.

    Rows with non-finite or non-positive x or y cannot be on a log scale and are dropped
    (``n_dropped``). ``reference_slope`` is the theory's exponent, reported next to the fit."""
    from scipy import stats  # imported where used: 0.5 s a process
    xs = pd.to_numeric(table[x], errors="coerce").to_numpy(float)
    ys = pd.to_numeric(table[y], errors="coerce").to_numpy(float)
    keep = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
    n = int(keep.sum())
    if n < 2 or np.unique(xs[keep]).size < 2:
        raise ValueError(f"spectral_fit needs at least 2 distinct positive {x} values with positive {y}; got {n} points")
    lx, ly = np.log(xs[keep]), np.log(ys[keep])
    fit = stats.linregress(lx, ly)
    if n > 2:
        half = stats.t.ppf(0.5 + level / 2.0, n - 2) * fit.stderr
        lo, hi = fit.slope - half, fit.slope + half
    else:  # two points fix a line exactly but say nothing about its uncertainty
        lo, hi = -math.inf, math.inf
    out = {"slope": float(fit.slope), "ci_low": float(lo), "ci_high": float(hi), "level": level,
           "intercept": float(fit.intercept), "stderr": float(fit.stderr), "r2": float(fit.rvalue ** 2),
           "n": n, "n_dropped": int(len(xs) - n), "x": x, "y": y, "reference_slope": reference_slope}
    if reference_slope is not None:
        out["reference_in_ci"] = bool(lo <= reference_slope <= hi)
    return out


def load_tables(run_dir: Path, with_skipped: bool = False):
    """(points, summary, note) of the runs under ``run_dir``, what the figures and the report draw from; a table
    that cannot be had is None and ``note`` says why. ``DIR/summary.csv`` (from ``python -m analysis summarize``)
    wins; without it the summary is computed with the pipeline's default target, DEFAULT_TARGET_REL.
    ``with_skipped``: also the run directories left out and why (Runs.skipped), from the same reading."""
    summary_csv = Path(run_dir) / "summary.csv"
    try:  # one of other columns or values raises DamagedFile (one line from the command line)
        summary = read_summary(summary_csv) if summary_csv.is_file() else None
    except (OSError, ValueError):  # damaged (pandas' parser errors are ValueErrors): computed again below
        summary = None

    def out(points, summary, note, skipped=()):
        return (points, summary, note, list(skipped)) if with_skipped else (points, summary, note)

    runs = load_runs(run_dir)
    if not len(runs):
        return out(None, summary, f"no readable runs under {run_dir}", runs.skipped)
    if summary is None:
        summary = summarize(runs, target_rel=DEFAULT_TARGET_REL)
    return out(runs.points, summary, "", runs.skipped)
