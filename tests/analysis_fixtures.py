"""Hand-made run directories in the format of Contract 2 (run.json + metrics.parquet), with
known answers, for the analysis tests; no training code is involved."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pandas as pd

from bench.algorithms import ALGORITHMS
from bench.faults import parse_faults

METRICS = ["step", "epoch", "train_loss", "train_loss_workers", "test_loss", "test_acc",
           "local_test_acc_mean", "consensus_distance", "bits_per_worker", "bits_paper_per_worker",
           "time_compute_s", "time_comm_s", "time_s", "wall_s", "lr"]


def make_run(dir, *, algorithm="choco", compressor="sign", topology="ring", nodes=8, seed=0,
             status="completed", epochs_points=None, spectral_gap=0.1, network="datacenter-10g",
             task="mnist1d-mlp", data="shuffle", steps_per_epoch=10, bits_per_step=1000.0,
             seconds_per_epoch=2.0, faults=None, messages_per_step=None, dropped_share=None, timing=None,
             **config) -> Path:
    """Write a run directory at ``dir`` and return its path.

    ``epochs_points``: list of dicts (or a DataFrame), one per evaluation point, each with at
    least ``epoch``; any metric column given is kept as is. Missing columns are filled so the
    answers are easy to compute by hand: ``step = epoch * steps_per_epoch``,
    ``bits_per_worker = bits_paper_per_worker = step * bits_per_step``,
    ``time_s = epoch * seconds_per_epoch`` (all compute), ``test_acc`` 0.5, ``test_loss`` =
    1 - test_acc, ``consensus_distance`` 0.01. Default: points at epochs 0, 1, 2 with accuracy
    0.1, 0.5, 0.7. ``**config`` adds or overrides keys of run.json's ``config`` (e.g. lr=0.05,
    epochs=3, gamma=0.4); ``timing``: run.json's (how busy the machine was), none by default.
    ``epochs_points=[]`` writes an empty metrics file and ``metrics=False`` none at all (for runs that died before
    their first evaluation).
    """
    write_metrics = config.pop("metrics", True)
    if epochs_points is None:
        epochs_points = [{"epoch": 0, "test_acc": 0.1}, {"epoch": 1, "test_acc": 0.5}, {"epoch": 2, "test_acc": 0.7}]
    m = pd.DataFrame(epochs_points).copy()
    if not len(m):
        m = pd.DataFrame({c: pd.Series(dtype="int64" if c == "step" else float) for c in METRICS})
    else:
        m["epoch"] = m["epoch"].astype(float)
        m = _with_defaults(m, step=(m["epoch"] * steps_per_epoch).round().astype("int64"), test_acc=0.5,
                           consensus_distance=0.01, lr=config.get("lr", 0.1))
        bits, compute = m["step"] * bits_per_step, m["epoch"] * seconds_per_epoch
        m = _with_defaults(m, bits_per_worker=bits, bits_paper_per_worker=bits, time_compute_s=compute,
                           time_comm_s=0.0, test_loss=1.0 - m["test_acc"], train_loss=1.0 - m["test_acc"],
                           train_loss_workers=1.0 - m["test_acc"], local_test_acc_mean=m["test_acc"])
        total = m["time_compute_s"] + m["time_comm_s"]
        m = _with_defaults(m, time_s=total, wall_s=total)
        if messages_per_step is not None:
            share = (faults or {}).get("drop", 0.0) if dropped_share is None else dropped_share
            m["messages_sent"] = (m["step"] * messages_per_step).round().astype("int64")
            m["messages_dropped"] = (m["messages_sent"] * share).astype("int64")
        m = m[METRICS + [c for c in m.columns if c not in METRICS]]
    epochs = config.pop("epochs", float(m["epoch"].max()) if len(m) else 1.0)
    cfg = {"task": task, "algorithm": algorithm, "compressor": compressor, "topology": topology,
           "nodes": nodes, "weights": None, "epochs": epochs, "seed": seed, "lr": 0.1,
           "lr_schedule": "constant", "batch_size": 32, "data": data, "momentum": 0.0,
           "weight_decay": 0.0, "gamma": "auto", "network": network, "compute_time": "measured",
           **({} if faults is None else {"faults": faults}), **config}
    fingerprint = hashlib.sha1(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:10]
    run_id = f"{task}_{algorithm}_{compressor}_{topology}{nodes}_s{seed}_{fingerprint}"
    final = {k: (None if isinstance(v, float) and math.isnan(v) else v)
             for k, v in (m.iloc[-1].to_dict().items() if len(m) else [])}
    record = {
        "run_id": run_id, "fingerprint": fingerprint, "status": status, "config": cfg,
        "topology": {"name": topology, "n": nodes, "weights": "uniform", "spectral_gap": spectral_gap,
                     "beta": 1.0, "max_degree": 2, "num_edges": nodes},
        "compressor": {"spec": compressor, "name": compressor.split(":")[0], "form": "contraction",
                       "unbiased": False, "delta_measured": 0.5},
        "gamma": {"value": None if algorithm == "allreduce" else 0.5,
                  "source": "unused" if algorithm == "allreduce" else "given"},
        "task": {"name": task, "n_params": 1000, "train_size": 100, "test_size": 50,
                 "steps_per_epoch": steps_per_epoch, "options": {}},
        # run.json's "algorithm" object as bench writes it (its class's own description)
        "algorithm": ALGORITHMS.get(algorithm).describe() if algorithm in ALGORITHMS else {"name": algorithm,
                                                                                             "label": algorithm},
        "steps_per_epoch": steps_per_epoch, "total_steps": int(epochs * steps_per_epoch),
        "provenance": {"python": "test"}, "start_time": "2026-01-01T00:00:00+00:00",
        "final": final,
        **_faults_record(faults, seed, algorithm), **({} if timing is None else {"timing": timing}),
    }
    path = Path(dir)
    path.mkdir(parents=True, exist_ok=True)
    (path / "run.json").write_text(json.dumps(record, indent=1, default=float))
    if write_metrics:
        m.to_parquet(path / "metrics.parquet", index=False)
    return path


def _with_defaults(frame: pd.DataFrame, **columns) -> pd.DataFrame:
    """``frame`` with each of ``columns`` it lacks."""
    return frame.assign(**{c: v for c, v in columns.items() if c not in frame})


def _faults_record(faults, seed, algorithm) -> dict:
    """run.json's "faults" object as bench's runner writes it: only for a network that is not perfect."""
    spec = parse_faults(faults)
    if not spec.present:
        return {}
    rule = getattr(ALGORITHMS.get(algorithm), "fault_rule", None) if algorithm in ALGORITHMS else None
    return {"faults": {**spec.to_dict(), "seed": seed, "rule": rule}}


def make_cell(root, name, accs, consensus=None, **kw) -> list[Path]:
    """One run per seed (0, 1, ...) under ``root/name/s<seed>``; seed i ends with ``accs[i]``
    (points: epoch 0 at 0.1, epoch 1 at half way, epoch 2 at ``accs[i]``) and, given ``consensus``, has the
    consensus distance ``consensus[i]`` after step 0 (0 at the start)."""
    return [make_run(Path(root) / name / f"s{i}", seed=i, epochs_points=[
        {"epoch": e, "test_acc": acc, **({} if consensus is None else {"consensus_distance": consensus[i] * (e > 0)})}
        for e, acc in enumerate([0.1, (0.1 + a) / 2, a])], **kw) for i, a in enumerate(accs)]


# the settings of the figure catalog's tiny grid study (an i.i.d. and a sorted partition at two n on a ring, a torus
# at the larger n) with the spectral gap ρ of each graph
RHO = {("ring", 4): 0.67, ("ring", 9): 0.2, ("torus", 9): 0.5}
SETTINGS = [("ring", 4, "shuffle"), ("ring", 9, "shuffle"), ("torus", 9, "shuffle"), ("ring", 4, "sorted"),
            ("ring", 9, "sorted")]


def page_data(page: Path) -> dict:
    """The data a results browser's page (python -m analysis browse) embeds and draws."""
    return json.loads(page.read_text().split('id="browser-data">')[1].split("</script>")[0])
