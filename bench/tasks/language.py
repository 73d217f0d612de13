"""Word-level language modelling on WikiText-2 with the paper's LSTM (perplexity).

Each worker holds a fixed contiguous shard of the training stream (the social-network setting:
data split once), batchified into ``batch_size`` parallel streams and read in BPTT windows;
hidden states are carried across windows and reset every epoch.
"""
from __future__ import annotations

import math
from typing import Any, Iterator

import torch
import torch.nn.functional as F

from ..data import load_dataset
from ..errors import BenchError
from ..models import make_model
from .base import TASKS, Task, TaskSetup
from .flat import FlatModel
from .gradients import loop_gradients
from .streams import seed_from as _seed_from


def batchify(stream: torch.Tensor, batch: int) -> torch.Tensor:
    """``[T]`` → ``[batch, T // batch]``: ``batch`` contiguous streams read side by side."""
    length = len(stream) // batch
    return stream[: length * batch].view(batch, length)


@TASKS.register("wikitext2-lstm")
class LanguageTask(Task):
    name = "wikitext2-lstm"
    metric_names = ("test_loss", "test_acc", "test_ppl")
    default_options: dict[str, Any] = {"emb": 650, "hidden": 650, "num_layers": 3, "dropout": 0.4,
                                       "tie_weights": True, "bptt": 30, "eval_batch": 10,
                                       "train_eval_tokens": 20000}

    def __init__(self, setup: TaskSetup):
        super().__init__(setup)
        if setup.data != "split":
            raise BenchError(f"task {self.name!r} deals contiguous text shards; use data=split (got {setup.data!r})")
        opts = self.options
        self.data = load_dataset("wikitext2", setup.data_root, setup.seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(setup.seed)
            self.model = make_model("lstm", vocab_size=len(self.data.vocab), emb=opts["emb"], hidden=opts["hidden"],
                                    num_layers=opts["num_layers"], dropout=opts["dropout"],
                                    tie_weights=opts["tie_weights"]).to(self.device)
        self.flat = FlatModel(self.model)
        self.d, self.segments = self.flat.d, self.flat.segments
        self.bptt = int(opts["bptt"])
        n = setup.n_workers
        shard = len(self.data.train) // n
        self.streams = [batchify(self.data.train[i * shard:(i + 1) * shard], setup.batch_size).to(self.device)
                        for i in range(setup.lo, setup.hi)]
        self.steps_per_epoch = (self.streams[0].shape[1] - 1) // self.bptt
        if self.steps_per_epoch < 1:
            raise BenchError(f"training text too short: {shard} tokens per worker cannot fill one window of "
                             f"batch_size={setup.batch_size} × bptt={self.bptt}")
        self.train_size, self.test_size = len(self.data.train), len(self.data.test)
        self.hidden: list | None = None

    def init_params(self) -> torch.Tensor:
        return self.flat.get().to(self.device).repeat(self.setup.local_workers, 1)

    def start_epoch(self, epoch: int) -> None:
        self.hidden = [self.model.init_state(self.setup.batch_size) for _ in range(self.setup.local_workers)]

    def batches(self, epoch: int) -> Iterator[tuple[int, int]]:
        for step in range(self.steps_per_epoch):
            yield epoch, step

    def gradients(self, x: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, step = batch
        if self.hidden is None:
            self.start_epoch(epoch)
        lo = step * self.bptt

        def worker_loss(i: int) -> torch.Tensor:
            window = self.streams[i][:, lo:lo + self.bptt + 1]
            # dropout masks are a function of (seed, epoch, step, worker): resumable and reproducible
            torch.manual_seed(_seed_from(self.setup.seed, epoch, step, self.setup.lo + i))
            logits, state = self.model(window[:, :-1], self.hidden[i])
            self.hidden[i] = tuple(s.detach() for s in state)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))

        return loop_gradients(self.flat, x, worker_loss)

    @torch.no_grad()
    def _score(self, stream: torch.Tensor) -> tuple[float, float]:
        data = batchify(stream.to(self.device), int(self.options["eval_batch"]))
        state = self.model.init_state(data.shape[0])
        loss_sum, correct, count = 0.0, 0, 0
        for lo in range(0, data.shape[1] - 1, self.bptt):
            window = data[:, lo:lo + self.bptt + 1]
            logits, state = self.model(window[:, :-1], state)
            target = window[:, 1:].reshape(-1)
            flat_logits = logits.reshape(-1, logits.shape[-1])
            loss_sum += float(F.cross_entropy(flat_logits, target, reduction="sum"))
            correct += int((flat_logits.argmax(1) == target).sum())
            count += target.numel()
        return loss_sum / count, correct / count

    def evaluate(self, flat: torch.Tensor, buffers=None) -> dict[str, float]:
        self.flat.load(flat)
        self.model.eval()
        test_loss, test_acc = self._score(self.data.test)
        train_loss, _ = self._score(self.data.train[: int(self.options["train_eval_tokens"])])
        out = {"test_loss": test_loss, "test_acc": test_acc, "test_ppl": math.exp(min(test_loss, 700.0)),
               "train_loss": train_loss}
        if self.setup.val_fraction > 0:  # WikiText-2 ships its own validation text: tuning reads that
            val_loss, val_acc = self._score(self.data.valid)
            out.update(val_loss=val_loss, val_acc=val_acc, val_ppl=math.exp(min(val_loss, 700.0)))
        return out

    def state_dict(self) -> dict:
        return {"hidden": [list(h) for h in self.hidden] if self.hidden is not None else None}

    def load_state_dict(self, state: dict) -> None:
        hidden = state["hidden"]
        self.hidden = [tuple(h) for h in hidden] if hidden is not None else None
