"""Progress output: a tqdm bar on a terminal, plain log lines otherwise, nothing with --quiet.

Off a terminal (a batch job's log, a pipeline's log file) every evaluation is one line, flushed as it is
written so that the log can be read while the run goes on::

    step 250/1000 epoch 2.50 train_loss 0.4312 test_acc 0.8610 consensus 1.2e-03 Mbit/worker 4.210 \
elapsed 0:01:05 ETA 0:03:15

The runner adds the closing line with the run's status."""
from __future__ import annotations

import math
import sys
import time

from tqdm import tqdm


def clock(seconds: float | None) -> str:
    """``H:MM:SS`` (hours beyond 24 kept as hours); ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class Progress:
    def __init__(self, total: int, done: int, steps_per_epoch: int, quiet: bool = False):
        self.quiet = quiet
        self.total = total
        self.tty = sys.stderr.isatty()
        self.bar = None
        if not quiet and self.tty:
            self.bar = tqdm(total=total, initial=done, unit="step", dynamic_ncols=True, file=sys.stderr)
        self.loss = math.nan
        # this process's pace (a resumed run starts at `done`): the ETA of the steps left
        self.started, self.first_step = time.perf_counter(), done

    def step(self, epoch: float, loss: float, steps: int = 1) -> None:
        """``steps`` more steps done, the last with ``loss`` (the runner reads losses every few steps)."""
        self.loss = loss
        if self.bar is not None:
            self.bar.update(steps)
            self.bar.set_postfix(epoch=f"{epoch:.2f}", loss=f"{loss:.4g}")

    def eta(self, step: int) -> float | None:
        """Seconds until the last step at the pace of this process so far (None before a step is timed)."""
        if step >= self.total:
            return 0.0
        if step <= self.first_step:
            return None
        pace = (time.perf_counter() - self.started) / (step - self.first_step)
        return pace * (self.total - step)

    def line(self, row: dict) -> str:
        """The plain line of one evaluation row."""
        elapsed = row.get("wall_s", time.perf_counter() - self.started)  # the run's, across resumptions
        return (f"step {row['step']}/{self.total} epoch {row['epoch']:.2f} train_loss {row['train_loss']:.4g} "
                f"test_acc {row['test_acc']:.4f} consensus {row['consensus_distance']:.3g} "
                f"Mbit/worker {row['bits_per_worker'] / 1e6:.3f} elapsed {clock(elapsed)} "
                f"ETA {clock(self.eta(row['step']))}")

    def evaluated(self, row: dict) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.set_postfix(epoch=f"{row['epoch']:.2f}", loss=f"{row['train_loss']:.4g}",
                                 acc=f"{row['test_acc']:.3f}")
        else:
            print(self.line(row), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
