"""Progress output: a tqdm bar on a terminal, plain log lines otherwise, nothing with --quiet."""
from __future__ import annotations

import math
import sys

from tqdm import tqdm


class Progress:
    def __init__(self, total: int, done: int, steps_per_epoch: int, quiet: bool = False):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.bar = None
        if not quiet and self.tty:
            self.bar = tqdm(total=total, initial=done, unit="step", dynamic_ncols=True, file=sys.stderr)
        self.loss = math.nan

    def step(self, epoch: float, loss: float) -> None:
        self.loss = loss
        if self.bar is not None:
            self.bar.update(1)
            if self.bar.n % 10 == 0:
                self.bar.set_postfix(epoch=f"{epoch:.2f}", loss=f"{loss:.4g}")

    def evaluated(self, row: dict) -> None:
        if self.quiet:
            return
        text = (f"step {row['step']} epoch {row['epoch']:.2f} train_loss {row['train_loss']:.4g} "
                f"test_acc {row['test_acc']:.4f} consensus {row['consensus_distance']:.3g} "
                f"Mbit/worker {row['bits_per_worker'] / 1e6:.3f}")
        if self.bar is not None:
            self.bar.set_postfix(epoch=f"{row['epoch']:.2f}", loss=f"{row['train_loss']:.4g}",
                                 acc=f"{row['test_acc']:.3f}")
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
