"""Run shapes and their timing: jobs grouped by what a training step costs, and for each shape a few
real training steps and one evaluation through the runner's own pieces, on synthetic data.

A shape is (task, task options, n, batch per worker, backend and processes): runs of one shape differ
in the algorithm's knobs, the compressor, the topology and the data deal, which change a step's cost
far less than the model and the number of stacked workers do.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..algorithms import ALGORITHMS
from ..run.config import RunConfig
from .sizes import REAL, DataModel, DataSizes, dataset_of, sizes_of, write_synthetic


@dataclass(frozen=True)
class Shape:
    task: str
    options: str  # the run's task options as sorted JSON
    nodes: int
    batch_size: int
    backend: str
    procs: int

    @classmethod
    def of(cls, cfg: RunConfig) -> "Shape":
        procs = (cfg.procs or cfg.nodes) if cfg.backend == "dist" else 1
        return cls(cfg.task, json.dumps(cfg.task_options, sort_keys=True, default=str), cfg.nodes, cfg.batch_size,
                   cfg.backend, procs)

    def label(self) -> str:
        options = ",".join(f"{k}={v}" for k, v in sorted(json.loads(self.options).items()))
        backend = f" dist/{self.procs}" if self.backend == "dist" else ""
        return f"{self.task} n={self.nodes} b={self.batch_size}{backend}" + (f" [{options}]" if options else "")


@dataclass(frozen=True)
class Timing:
    """What one shape costs, at the real data sizes."""

    device: str
    s_step: float  # median seconds of a training step (all n workers)
    s_per_unit: float  # seconds of evaluating one model per evaluated sample or token
    data: DataModel  # at the real sizes
    n_params: int
    gradient_path: str
    note: str = ""
    others_cpu_share: float = float("nan")  # while it was timed (bench/cpu_meter.py); NaN where unmeasured

    @classmethod
    def failed(cls, device: str, why: str) -> "Timing":
        """A shape that could not be timed: its jobs get no planned hours (NaN)."""
        nan = float("nan")
        return cls(device, nan, nan, DataModel("memory", DataSizes(0, 0)), 0, "-", why)

    def run_cost(self, cfg: RunConfig) -> tuple[int, int, float]:
        """(steps, evaluations, seconds of one evaluation) of a run of this shape."""
        from ..run.evaluation import local_sample
        from ..run.schedule import step_counts

        if not math.isfinite(self.s_step):
            return 0, 0, float("nan")
        steps_per_epoch = self.data.steps_per_epoch(cfg.nodes, cfg.batch_size, cfg.val_fraction)
        epochs = cfg.epochs if cfg.stop_at is None else min(cfg.epochs, cfg.stop_at)  # a halving rung's share
        steps, _, evaluations = step_counts(epochs, steps_per_epoch, cfg.eval_every)
        models = 1 + len(local_sample(cfg.nodes, cfg.eval_local_workers))  # the averaged model and local ones
        return steps, evaluations, models * self.s_per_unit * self.data.evaluated_units(cfg.val_fraction)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


PATH_NAMES = {"vmap": "vectorised", "loop": "per-worker loop"}


def path_note(path: str, reason: str, imposed, jobs_setting) -> str:
    """Which gradient path was timed, and whether it is the one the jobs take (their task_options.vectorize)."""
    name = PATH_NAMES.get(path, path)
    if imposed is None:
        return f"timed: {name}, the path the jobs take ({reason})"
    return (f"timed: {name}, imposed by --vectorize {str(imposed).lower()} (the jobs follow "
            f"task_options.vectorize={str(jobs_setting).lower()})")


def _silent(event: str, seconds: float, detail: str = "") -> None:
    pass


def measure(cfg: RunConfig, device: str, steps: int, warmup: int, workdir: Path, vectorize=None,
            max_workers: int | None = None, report=_silent) -> Timing:
    """Time ``warmup + steps`` training steps (the median of the last ``steps``) and one evaluation of the
    averaged model for a run shaped like ``cfg``, on synthetic data written under ``workdir``.
    ``report(event, seconds, detail)`` hears of each part as it ends: "path" (the run built and its gradient path
    settled; detail: which path, bench.plan.measure.path_note), "set-up" (the runner's untimed warm-up step),
    "warm-up step", "timed step" and "evaluation", so that a caller can show progress and extrapolate."""
    from ..run.runner import Loop
    from ..run.resolved import resolve_run
    from ..run.setup import build, device_of
    from ..tasks import TASKS

    nodes = min(cfg.nodes, max_workers) if max_workers else cfg.nodes
    notes = []
    changes: dict = dict(device=device, quiet=True, backend="sim", procs=None, nodes=nodes)
    if cfg.backend == "dist":
        notes.append(f"dist ({Shape.of(cfg).procs} processes) timed in one process")
    if nodes < cfg.nodes:
        changes["topology"] = "ring" if nodes > 2 else "complete"
        notes.append(f"timed with {nodes} of {cfg.nodes} workers ({changes['topology']}); s/step scaled by n "
                     "(extrapolated)")
    # a knob left to tuning changes no step's cost: fixed at a planning value, not tuned for the plan
    changes["algorithm_options"] = ALGORITHMS.get(cfg.algorithm).planning_options(cfg.algorithm_options)
    if vectorize is not None:
        changes["task_options"] = {**cfg.task_options, "vectorize": vectorize}
    options = {**TASKS.get(cfg.task).options, **cfg.task_options}  # what the jobs run with
    dataset = dataset_of(cfg.task)
    bptt = int(options.get("bptt", 1))
    root = write_synthetic(dataset, workdir / "data", nodes, cfg.batch_size, bptt)
    if root is not None:
        changes["data_root"] = str(root)
        notes.append("synthetic data")
    mcfg = dataclasses.replace(cfg, **changes)
    dev = device_of(device)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    tick = time.perf_counter()
    parts = build(resolve_run(mcfg))
    task = parts.task
    task.prepare(parts.algo.x)  # the path by the run's rule (what Loop does first; a trial step under auto)
    reason = (task.gradient_path_info or {}).get("reason", "")
    notes.insert(0, path_note(str(task.gradient_path), reason, vectorize, options.get("vectorize", "auto")))
    report("path", time.perf_counter() - tick, notes[0])
    tick = time.perf_counter()
    loop = Loop(mcfg, workdir / "run", parts, dev, None)  # keeps that path; its untimed warm-up step
    report("set-up", time.perf_counter() - tick)
    times, epoch = [], 0
    task.start_epoch(epoch)
    batches = task.batches(epoch)
    for i in range(warmup + steps):
        batch = next(batches, None)
        if batch is None:  # the synthetic epoch is short: start the next one
            epoch += 1
            task.start_epoch(epoch)
            batches = task.batches(epoch)
            batch = next(batches)
        _sync(dev)
        tick = time.perf_counter()
        loop.step(batch)
        _sync(dev)
        if i >= warmup:
            times.append(time.perf_counter() - tick)
        report("timed step" if i >= warmup else "warm-up step", time.perf_counter() - tick)
    loop.local_workers = []  # the averaged model alone; local models cost the same each
    _sync(dev)
    tick = time.perf_counter()
    loop.add_row()
    _sync(dev)
    eval_s = time.perf_counter() - tick
    report("evaluation", eval_s)
    synthetic = DataModel.of(task, sizes_of(task))
    real = DataModel.of(task, REAL.get(dataset, synthetic.sizes))
    if dev.type == "cuda":
        notes.append(f"peak {torch.cuda.max_memory_allocated(dev) / 2**30:.1f} GiB")
    timing = Timing(device=str(dev), s_step=statistics.median(times) * cfg.nodes / nodes,
                    s_per_unit=eval_s / synthetic.evaluated_units(mcfg.val_fraction), data=real,
                    n_params=task.d, gradient_path=str(task.gradient_path), note="; ".join(notes))
    del loop, parts, task
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return timing
