"""One evaluation point of a run: the averaged model, a sample of local models, consensus distance."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..tasks import Task


@dataclass
class Counters:
    """Everything cumulative the runner tracks between evaluations (and checkpoints)."""

    global_step: int = 0
    bits: float = 0.0  # wire bits per worker
    paper_bits: float = 0.0  # paper's accounting per worker
    time_compute_s: float = 0.0
    time_comm_s: float = 0.0
    wall_s: float = 0.0  # wall time of earlier sessions of this run (resumes add to it)
    window_loss_sum: float = 0.0  # workers' minibatch losses since the last evaluation
    window_steps: int = 0
    initial_distance: float = 0.0
    rows: list[dict] = field(default_factory=list)

    def state(self) -> dict:
        return dict(self.__dict__)


def local_sample(n: int, k: int) -> list[int]:
    """``k`` evenly spaced worker indices (all of them when k >= n)."""
    if k <= 0:
        return []
    if k >= n:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0]


def evaluation_row(task: Task, x: torch.Tensor, xbar: torch.Tensor, counters: Counters, epoch: float,
                   lr: float, local_workers: list[int], wall_s: float, comm, writer: bool = True) -> dict:
    """One metrics row. Every process calls it (the means over workers are collectives); the averaged
    model is evaluated where the row is written, each sampled local model by the process holding it."""
    n = task.setup.n_workers
    distance = float(comm.global_mean(((x - xbar) ** 2).sum(dim=1, keepdim=True)))
    row = {"step": counters.global_step, "epoch": epoch}
    if task.has_gradient:
        buffers = task.local_buffers()
        averaged = comm.global_mean(buffers) if buffers is not None else None
        metrics = task.evaluate(xbar, averaged) if writer else {}
        lo, hi = task.setup.lo, task.setup.hi
        mine = [task.evaluate(x[g - lo], task.worker_buffers(g - lo))["test_acc"] for g in local_workers if lo <= g < hi]
        totals = comm.global_mean(torch.tensor([[sum(mine), len(mine)]], dtype=torch.float64, device=x.device)) * n
        local_sum, local_count = float(totals[0]), float(totals[1])
        row.update({
            "train_loss": metrics.get("train_loss", math.nan),
            "train_loss_workers": (counters.window_loss_sum / counters.window_steps
                                   if counters.window_steps else math.nan),
            "test_loss": metrics.get("test_loss", math.nan), "test_acc": metrics.get("test_acc", math.nan),
            "local_test_acc_mean": local_sum / local_count if local_count else math.nan,
        })
        row.update({k: v for k, v in metrics.items() if k not in row})
    else:
        # consensus: the error to the exact initial average, relative to its start
        rel = distance / counters.initial_distance if counters.initial_distance else math.nan
        row.update({"train_loss": rel, "train_loss_workers": rel, "test_loss": rel, "test_acc": math.nan,
                    "local_test_acc_mean": math.nan})
    row.update({
        "consensus_distance": distance,
        "bits_per_worker": counters.bits, "bits_paper_per_worker": counters.paper_bits,
        "time_compute_s": counters.time_compute_s, "time_comm_s": counters.time_comm_s,
        "time_s": counters.time_compute_s + counters.time_comm_s, "wall_s": wall_s, "lr": lr,
    })
    counters.window_loss_sum, counters.window_steps = 0.0, 0
    return row
