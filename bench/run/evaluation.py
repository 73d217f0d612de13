"""One evaluation point of a run: the averaged model, the local models, consensus distance.

The paper's Table 1 reports each worker's own model on the whole test set, averaged over workers:
the local models. They are scored in one vectorised pass per chunk of test data, all n of them at
every evaluation by default (``eval_local_workers: all``), an evenly spaced sample of k when a study
asks for less, and always all n at the final evaluation."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..tasks import Task


@dataclass
class Counters:
    """Everything cumulative the runner tracks between evaluations (and checkpoints)."""

    global_step: int = 0
    bits: float = 0.0  # bits a worker put on its links, mean over workers
    worker_bits: list[float] | None = None  # per worker (its max is bits_per_worker_max)
    paper_bits: float = 0.0  # paper's accounting per worker
    time_compute_s: float = 0.0
    time_comm_s: float = 0.0
    wall_s: float = 0.0  # wall time of earlier sessions of this run (resumes add to it)
    window_loss_sum: float = 0.0  # workers' minibatch losses since the last evaluation
    window_steps: int = 0
    initial_distance: float = 0.0
    messages_sent: int = 0  # messages put on directed gossip links, over all workers
    messages_dropped: int = 0  # of those, lost (the run's faults)
    messages_late: int = 0  # of those, delivered faults.staleness rounds late
    workers_absent: int = 0  # worker-rounds sat out (faults.active, absent, pairwise)
    # what other processes took of the machine while the run measured its compute (bench/run/busy.py): their CPU
    # seconds, and wall seconds x cores over which it was read; summed over sessions, as the checkpoint keeps them
    others_cpu_s: float = 0.0
    metered_core_s: float = 0.0
    metered_cores: int = 0
    rows: list[dict] = field(default_factory=list)
    # the latest all-worker scores: {"workers": [...], "test_acc": [...], "test_loss": [...]}
    local_all: dict | None = None

    def state(self) -> dict:
        return dict(self.__dict__)

    def add_bits(self, traffic) -> None:
        self.bits += traffic.wire_bits
        self.paper_bits += traffic.paper_bits
        self.messages_sent += traffic.link_messages
        self.messages_dropped += traffic.link_lost
        self.messages_late += traffic.link_late
        if traffic.worker_bits is not None:
            sent = traffic.worker_bits.tolist()
            self.worker_bits = sent if self.worker_bits is None else [a + b for a, b in zip(self.worker_bits, sent)]

    @property
    def bits_max(self) -> float:
        """The most bits any one worker has put on its links so far."""
        return max(self.worker_bits) if self.worker_bits else self.bits


def local_sample(n: int, k: int | str) -> list[int]:
    """``k`` evenly spaced worker indices (all of them when k >= n or k is "all")."""
    if k == "all":
        return list(range(n))
    if k <= 0:
        return []
    if k >= n:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0]


def local_scores(task: Task, x: torch.Tensor, workers: list[int], comm) -> tuple[torch.Tensor, torch.Tensor]:
    """(test_acc [n], test_loss [n]) of the local models of ``workers`` (NaN for the others). Each
    process scores the ones it holds; one all-reduce of 3n numbers gathers them."""
    n, lo, hi = task.setup.n_workers, task.setup.lo, task.setup.hi
    rows = [g - lo for g in workers if lo <= g < hi]
    gathered = torch.zeros(hi - lo, 3 * n, dtype=torch.float64, device=x.device)
    if rows:
        buffers = task.local_buffers()
        scores = task.evaluate_workers(x[rows], None if buffers is None else buffers[rows])
        r = torch.tensor(rows, device=x.device)
        g = r + lo
        gathered[r, g] = scores["test_acc"].to(gathered)  # one copy each, not an element at a time
        gathered[r, n + g] = scores["test_loss"].to(gathered)
        gathered[r, 2 * n + g] = 1.0
    total = comm.global_mean(gathered) * n  # each entry is set on one row only: the mean times n is it
    seen = total[2 * n:] > 0.5
    nan = torch.tensor(math.nan, dtype=torch.float64, device=total.device)
    return torch.where(seen, total[:n], nan).cpu(), torch.where(seen, total[n:2 * n], nan).cpu()


def _summary(acc: torch.Tensor, loss: torch.Tensor) -> dict:
    seen = ~torch.isnan(loss)
    a, l_ = acc[seen], loss[seen]
    count = int(seen.sum())
    if not count:
        return {"local_test_acc_mean": math.nan, "local_test_acc_std": math.nan, "local_test_acc_min": math.nan,
                "local_test_acc_max": math.nan, "local_test_loss_mean": math.nan, "local_evaluated": 0}
    return {"local_test_acc_mean": float(a.mean()), "local_test_acc_std": float(a.std(unbiased=False)),
            "local_test_acc_min": float(a.min()), "local_test_acc_max": float(a.max()),
            "local_test_loss_mean": float(l_.mean()), "local_evaluated": count}


def evaluation_row(task: Task, x: torch.Tensor, xbar: torch.Tensor, counters: Counters, epoch: float,
                   lr: float, local_workers: list[int], wall_s: float, comm, writer: bool = True,
                   final: bool = False) -> dict:
    """One metrics row. Every process calls it (the means over workers are collectives); the averaged
    model is evaluated where the row is written, each local model by the process holding it (all n
    of them when ``final``)."""
    n = task.setup.n_workers
    distance = float(comm.global_mean(((x - xbar) ** 2).sum(dim=1, keepdim=True)))
    row = {"step": counters.global_step, "epoch": epoch}
    buffers = task.local_buffers()
    averaged = comm.global_mean(buffers) if buffers is not None else None
    metrics = task.evaluate(xbar, averaged) if writer else {}
    workers = list(range(n)) if final else local_workers
    acc, loss = local_scores(task, x, workers, comm)
    if len(workers) == n:
        counters.local_all = {"step": counters.global_step, "test_acc": acc.tolist(), "test_loss": loss.tolist()}
    row.update({
        "train_loss": metrics.get("train_loss", math.nan),
        "train_loss_workers": (counters.window_loss_sum / counters.window_steps
                               if counters.window_steps else math.nan),
        "test_loss": metrics.get("test_loss", math.nan), "test_acc": metrics.get("test_acc", math.nan),
        **_summary(acc, loss),
    })
    row.update({k: v for k, v in metrics.items() if k not in row})
    row.update({
        "consensus_distance": distance,
        "bits_per_worker": counters.bits, "bits_per_worker_max": counters.bits_max,
        "bits_paper_per_worker": counters.paper_bits,
        "messages_sent": counters.messages_sent, "messages_dropped": counters.messages_dropped,
        "messages_late": counters.messages_late, "workers_absent": counters.workers_absent,
        "time_compute_s": counters.time_compute_s, "time_comm_s": counters.time_comm_s,
        "time_s": counters.time_compute_s + counters.time_comm_s, "wall_s": wall_s, "lr": lr,
    })
    counters.window_loss_sum, counters.window_steps = 0.0, 0
    return row
