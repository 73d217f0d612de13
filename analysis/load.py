"""Read run directories (run.json + metrics.parquet, Contract 2) into one table per run and one
tidy table per run × evaluation point; unreadable or unfinished runs are listed, not fatal."""
from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis import labels
from analysis.checks import metrics_problem, record_problem
from analysis.files import read_regular

# the parts every cell key names, in this order (seed is what varies inside a cell)
CELL_PARTS = ["task", "algorithm", "compressor", "topology", "nodes", "data", "network"]
# config keys that change where or how a run is executed or logged, not what it computes
BOOKKEEPING = {"seed", "quiet", "device", "data_root", "eval_local_workers", "checkpoint_every", "stop_at",
               "eval_every", "divergence_loss"} | set(CELL_PARTS) | {"lr"}
IN_PROGRESS = {"running", "interrupted", "paused"}
SHARED_COLUMNS = {"lr"}  # in the metrics (the schedule's value at each evaluation) and in the run (the peak)

# the run's unreliable network (run.json "faults", written only when the network is not perfect; fault_columns)
FAULT_COLUMNS = ["drop", "drop_model", "burst", "drop_symmetric", "outages", "straggler_mean", "straggler_factor",
                 "late", "staleness", "active", "absences", "pairwise"]
# config keys added after runs were recorded without them: such a run ran at this value (so a run without the
# key and one that sets it to something else are different cells)
CONFIG_DEFAULTS = {"faults": {}}
# run.json's topology["n_eff"] holds the effective number of neighbours n_W(γ) (Vogels et al. 2022) at a few
# decays γ; the runs table's n_eff column is the one at this decay (runs written before it have none: NaN)
N_EFF_DECAY = 0.9

RUN_COLUMNS = ["run_id", "path", "status", "task", "algorithm", "compressor", "topology", "nodes",
               "seed", "spectral_gap", "n_eff", "beta", "weights", "gamma", "lr", "data", "network",
               "epochs", "n_params", "steps_per_epoch", "delta_measured", "cell", "n_points",
               "last_epoch", "final_test_acc", "best_test_acc", "final_test_loss",
               "final_local_acc", "final_local_acc_std", "final_local_acc_min",
               "final_consensus_distance", "bits_per_step", "paper_bits_per_step", "max_bits_per_step", "bits_count",
               *FAULT_COLUMNS, "dropped_share", "compute_measured", "others_cpu_share"]


@dataclass
class Runs:
    runs: pd.DataFrame                  # one row per run (RUN_COLUMNS)
    points: pd.DataFrame                # one row per run × evaluation point: metrics + run columns (lr: the
                                        # schedule's value there, lr_config: the configured peak)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    settings: pd.DataFrame | None = None  # one row per run: run_id and every key of its run.json config

    def __len__(self) -> int:
        return len(self.runs)

    def tidy(self) -> pd.DataFrame:
        """One row per run × evaluation: the metrics, the run's columns and, as further columns, every
        setting of its config not already there (lists and mappings as JSON text, a column of mixed
        types as text) — the study's ``points.parquet``."""
        if self.settings is None or self.points.empty:
            return self.points.copy()
        extra = [c for c in self.settings.columns if c == "run_id" or c not in self.points.columns]
        out = self.points.merge(self.settings[extra], on="run_id", how="left")
        out.insert(out.columns.get_loc("algorithm"), "method",
                   [labels.method_label(a, c) for a, c in zip(out["algorithm"], out["compressor"].astype(str))])
        for column in (c for c in out.columns if out[c].dtype == object):  # settings, and metrics bench never wrote
            kinds = {type(v) for v in out[column] if not (v is None or isinstance(v, float) and v != v)}
            if len(kinds) > 1 and not kinds <= {int, float}:
                out[column] = out[column].map(lambda v: None if v is None or isinstance(v, float) and v != v
                                              else str(v))
        return out

    @property
    def skipped(self) -> list[tuple[str, str]]:
        """The problems of runs left out of the tables (a run in progress is kept, so not here)."""
        kept = set(self.runs["path"])
        return [(path, reason) for path, reason in self.problems if path not in kept]


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _last(metrics: pd.DataFrame, column: str) -> float:
    return float(metrics[column].iloc[-1]) if column in metrics else math.nan


def _per_step(metrics: pd.DataFrame, column: str) -> float:
    # the bit counters are cumulative, so the last row over its step is the mean per step
    step = _last(metrics, "step")
    return _last(metrics, column) / step if step > 0 else math.nan


def fault_columns(faults) -> dict:
    """FAULT_COLUMNS of a ``faults`` object: run.json's (bench's normalised form) or a raw ``faults`` setting
    (what a study's cell configures); None or {} is a perfect network.

    ``drop``: the mean share of messages lost per directed link and round (0.0 without losses);
    ``drop_model``: ``bernoulli`` or ``gilbert-elliott`` where drop > 0, else ``none``; ``burst``: the mean
    length of a loss burst in rounds under gilbert-elliott, else NaN; ``drop_symmetric``: both directions of
    an edge lost together; ``outages``: how many scheduled edge outages (``down``) the run had;
    ``straggler_mean``: the exponential straggler's mean (each worker, each step: 1 + Exp(mean) times the
    compute), 0.0 without a straggler and NaN for a fixed one (a few workers slowed by a constant: not on
    that scale); ``straggler_factor``: a fixed straggler's factor, NaN otherwise; ``late`` and ``staleness``:
    the share of messages late and by how many rounds (0 and 0 without); ``active``: the chance a worker takes
    part in a round (1 without partial activation); ``absences``: how many scheduled absences (churn);
    ``pairwise``: one random edge a round (randomised pairwise gossip)."""
    faults = faults or {}
    if not isinstance(faults, dict):
        raise TypeError(f"faults is a {type(faults).__name__}, not a mapping")
    drop = _num(faults.get("drop", 0.0))
    model = str(faults.get("drop_model", "bernoulli")) if drop > 0 else "none"
    straggler = faults.get("straggler") or {}
    kind = straggler.get("model") if isinstance(straggler, dict) else None
    down = faults.get("down") or []
    return {"drop": drop, "drop_model": model,
            "burst": _num(faults.get("burst", 1.0)) if model == "gilbert-elliott" else math.nan,
            "drop_symmetric": bool(faults.get("symmetric", False)),
            "outages": len(down) if isinstance(down, list) else 0,
            "straggler_mean": (0.0 if not kind else _num(straggler.get("mean")) if kind == "exponential" else math.nan),
            "straggler_factor": _num(straggler.get("factor")) if kind == "fixed" else math.nan,
            "late": (late := _num(faults.get("late", 0.0))),
            "staleness": _num(faults.get("staleness", 1)) if late > 0 else 0.0,
            "active": _num(faults.get("active", 1.0)),
            "absences": len(faults.get("absent") or []) if isinstance(faults.get("absent") or [], list) else 0,
            "pairwise": bool(faults.get("pairwise", False))}


def _dropped_share(metrics: pd.DataFrame) -> float:
    """The share of the messages sent that were lost over the whole run (the counters are cumulative);
    NaN for a run that recorded no counts (older runs) or sent no gossip message."""
    sent = _last(metrics, "messages_sent")
    return _last(metrics, "messages_dropped") / sent if sent > 0 else math.nan


def _topology(cfg: dict, topo: dict) -> str:
    """The topology's spec; a graph read from a file (``file:PATH``) also names the digest of its
    edges, since the same path may have held another graph for another run."""
    spec = cfg.get("topology", topo.get("name"))
    digest = topo.get("digest")
    return f"{spec}#{digest}" if isinstance(digest, str) and digest else spec


_STATUS_RANK = {"completed": 0, "diverged": 1, "failed": 2, "interrupted": 3, "paused": 3, "running": 4}


def _one_per_seed(rows: list[dict], configs: list[dict], tables: list, problems: list) -> tuple[list, list, list]:
    """Runs of one cell and seed that differ only in bookkeeping (how often they evaluated or saved,
    where their data lay) are the same experiment: keep one (finished first, then the most evaluation
    points) and list the others as skipped, so that no seed counts twice."""
    best: dict[tuple, int] = {}
    for i, row in enumerate(rows):
        key = (row["cell"], row["seed"])
        j = best.get(key)
        rank = (_STATUS_RANK.get(row["status"], 5), -row["n_points"])
        if j is None or rank < (_STATUS_RANK.get(rows[j]["status"], 5), -rows[j]["n_points"]):
            best[key] = i
    keep = sorted(best.values())
    for i, row in enumerate(rows):
        j = best[(row["cell"], row["seed"])]
        if i != j:
            differ = sorted(k for k in set(configs[i]) | set(configs[j]) if configs[i].get(k) != configs[j].get(k))
            problems.append((row["path"], f"same cell and seed {row['seed']} as {rows[j]['path']} "
                                          f"(differs only in {', '.join(differ) or 'nothing'}); skipped"))
    return [rows[i] for i in keep], [configs[i] for i in keep], [tables[i] for i in keep]


def _final_local(metrics: pd.DataFrame, n: int) -> dict:
    """The paper's Table 1 metric at the last evaluation: the mean over all n workers of each one's own
    model on the test set, with the spread over workers (NaN for runs that did not score all n there)."""
    keys = ["final_local_acc", "final_local_acc_std", "final_local_acc_min"]
    if "local_evaluated" not in metrics or _last(metrics, "local_evaluated") != n:
        return dict.fromkeys(keys, math.nan)
    return dict(zip(keys, (_last(metrics, c) for c in ("local_test_acc_mean", "local_test_acc_std",
                                                        "local_test_acc_min"))))


def _algorithm(cfg: dict, described) -> str | None:
    """The run's method as the analysis names it: the configured algorithm, or the variant its options make of
    it (run.json's "algorithm": name, variant_of; e.g. choco+adagossip), shown apart in tables and figures."""
    algorithm = cfg.get("algorithm")
    if isinstance(described, dict) and described.get("variant_of") == algorithm and isinstance(
            described.get("name"), str) and described["name"]:
        return described["name"]
    return algorithm


def _run_row(path: Path, record: dict, metrics: pd.DataFrame) -> dict:
    cfg = record.get("config", {})
    topo, comp, task = record.get("topology", {}), record.get("compressor", {}), record.get("task", {})
    acc = metrics["test_acc"] if "test_acc" in metrics else pd.Series(dtype=float)
    return {
        "run_id": record.get("run_id", path.name), "path": str(path),
        "status": record.get("status", "unknown"),
        "task": cfg.get("task", task.get("name")), "algorithm": _algorithm(cfg, record.get("algorithm")),
        "compressor": cfg.get("compressor", comp.get("spec")), "topology": _topology(cfg, topo),
        "nodes": int(cfg.get("nodes", topo.get("n", 0))), "seed": int(cfg.get("seed", 0)),
        "spectral_gap": _num(topo.get("spectral_gap")),
        "n_eff": _num((topo.get("n_eff") or {}).get(f"gamma={N_EFF_DECAY}")), "beta": _num(topo.get("beta")),
        "weights": topo.get("weights", cfg.get("weights")),
        "gamma": _num((record.get("gamma") or {}).get("value")), "lr": _num(cfg.get("lr")),
        "data": cfg.get("data"), "network": cfg.get("network"), "epochs": _num(cfg.get("epochs")),
        "n_params": _num(task.get("n_params")),
        "steps_per_epoch": _num(record.get("steps_per_epoch", task.get("steps_per_epoch"))),
        "delta_measured": _num(comp.get("delta_measured")),
        "n_points": len(metrics), "last_epoch": _last(metrics, "epoch"),
        "final_test_acc": _last(metrics, "test_acc"),
        "best_test_acc": float(acc.max()) if acc.notna().any() else math.nan,
        "final_test_loss": _last(metrics, "test_loss"),
        **_final_local(metrics, int(cfg.get("nodes", topo.get("n", 0)))),
        "final_consensus_distance": _last(metrics, "consensus_distance"),
        "bits_per_step": _per_step(metrics, "bits_per_worker"),
        "paper_bits_per_step": _per_step(metrics, "bits_paper_per_worker"),
        "max_bits_per_step": _per_step(metrics, "bits_per_worker_max"),
        # runs recorded before the per-link count counted a gossip message once whatever the degree
        "bits_count": record.get("bits_count", "message"),
        **fault_columns(record.get("faults")), "dropped_share": _dropped_share(metrics),
        # how busy the machine was while the run measured its compute time (analysis/busy.py): NaN where the run
        # did not record it (before run.json's "timing") or its compute time was modelled
        "compute_measured": cfg.get("compute_time", "measured") == "measured",
        "others_cpu_share": _num((record.get("timing") or {}).get("others_cpu_share")),
    }


def _fmt(value) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return f"{value:g}" if isinstance(value, float) else str(value)


def _cell_keys(rows: list[dict], configs: list[dict]) -> list[str]:
    """Readable key of everything but the seed: the main parts, the LR, and any other config knob
    that differs between runs sharing those (so a momentum sweep gets one cell per value)."""
    bases = [("|".join(_fmt(r[p]) for p in CELL_PARTS) + f"|lr={_fmt(r['lr'])}") for r in rows]
    # a key absent from a run's config comes from an older schema, not a different setting: the run
    # had its default where one is known (CONFIG_DEFAULTS), else it is not compared on that key
    configs = [{**{k: v for k, v in CONFIG_DEFAULTS.items() if k not in c}, **c} for c in configs]
    keys = []
    for base, cfg in zip(bases, configs):
        peers = [c for b, c in zip(bases, configs) if b == base]
        extra = [k for k in sorted(cfg) if k not in BOOKKEEPING
                 and len({_fmt(p[k]) for p in peers if k in p}) > 1]
        keys.append(base + "".join(f"|{k}={_fmt(cfg.get(k))}" for k in extra))
    return keys


TUNING_DIR = "tune"  # a study's tuning trials: read by analysis.tuning, never results of the study


def load_runs(root) -> Runs:
    """Every directory under ``root`` (any depth, ``root`` included) holding a run.json, except
    tuning trials (under a ``tune/`` folder below ``root``: they trained on less data for fewer
    epochs and are not results of the study) and anything under a hidden folder (``.stale/``)."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory not found: {root}")
    rows, configs, tables, problems, seen = [], [], [], [], {}
    for run_json in sorted(root.rglob("run.json")):
        path = run_json.parent
        inside = path.relative_to(root).parts[:-1]
        if TUNING_DIR in inside or any(part.startswith(".") for part in inside):
            continue  # tuning trials, and bookkeeping such as runs set aside in .stale/
        try:
            record = json.loads(read_regular(run_json))
        except (OSError, ValueError) as err:
            problems.append((str(path), f"unreadable run.json: {err}"))
            continue
        wrong = record_problem(record)
        if wrong:
            problems.append((str(path), wrong))
            continue
        status = record.get("status", "unknown")
        metrics_file = path / "metrics.parquet"
        if not metrics_file.is_file():
            problems.append((str(path), f"no metrics.parquet (status {status})"))
            continue
        try:
            metrics = pd.read_parquet(io.BytesIO(read_regular(metrics_file)))
        except Exception as err:  # pyarrow raises several types for a truncated or foreign file
            problems.append((str(path), f"unreadable metrics.parquet: {err}"))
            continue
        metrics, wrong = metrics_problem(metrics)
        clash = [c for c in metrics.columns if c in RUN_COLUMNS and c not in SHARED_COLUMNS]
        if clash and not wrong:
            wrong = f"metrics.parquet has column {clash[0]!r}, which is the run's own (from run.json)"
        if wrong:
            problems.append((str(path), f"{wrong} (status {status})"))
            continue
        metrics = metrics.sort_values("step", kind="stable").reset_index(drop=True)
        try:
            row = _run_row(path, record, metrics)
        except (TypeError, ValueError, AttributeError) as err:  # a wrong type the checks above missed
            problems.append((str(path), f"unusable run.json or metrics.parquet: {err}"))
            continue
        run_id = row["run_id"]
        if run_id in seen:
            problems.append((str(path), f"duplicate run_id {run_id} (first seen in {seen[run_id]}); skipped"))
            continue
        seen[run_id] = str(path)
        if status in IN_PROGRESS:
            problems.append((str(path), f"in progress (status {status}); kept with {len(metrics)} points"))
        labels.learn(row["algorithm"], record.get("algorithm"))  # its display name, from bench's own description
        labels.learn_compressor(row["compressor"], record.get("compressor"))  # its label, order and marker, likewise
        rows.append(row)
        configs.append(record.get("config", {}))
        tables.append(metrics)
    for row, key in zip(rows, _cell_keys(rows, configs)):
        row["cell"] = key
    rows, configs, tables = _one_per_seed(rows, configs, tables, problems)
    for row in rows:  # every method of the loaded runs: the figures share one colour per method
        labels.method_label(row["algorithm"], row["compressor"])
    runs = pd.DataFrame(rows, columns=RUN_COLUMNS)
    if not tables:
        return Runs(runs, pd.DataFrame(columns=["step"] + RUN_COLUMNS), problems)
    points = pd.concat([_with_run(m, r) for m, r in zip(tables, rows)], ignore_index=True)
    settings = pd.DataFrame([{"run_id": r["run_id"], **{k: _setting(v) for k, v in c.items()}}
                             for r, c in zip(rows, configs)])
    return Runs(runs, points, problems, settings)


def _setting(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def _with_run(metrics: pd.DataFrame, row: dict) -> pd.DataFrame:
    """A run's evaluation points with its run columns. Where the metrics hold a column of the same name
    (``lr``: the schedule's value at each evaluation) they keep it, and the run's value is ``<name>_config``."""
    extra = {(f"{c}_config" if c in metrics else c): [row[c]] * len(metrics) for c in RUN_COLUMNS}
    return metrics.assign(**extra)
