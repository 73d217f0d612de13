"""Word-level language modelling on WikiText-2 with the paper's LSTM (perplexity).

Each worker holds a fixed contiguous shard of the training stream (the social-network setting:
data split once), batchified into ``batch_size`` parallel streams and read in BPTT windows;
hidden states, stacked over the local workers, are carried across windows (detached: truncated
backpropagation) and reset every epoch. Dropout masks are counter-based draws keyed by (seed,
epoch, step, global worker), so the vectorised path and the per-worker loop use the same masks.
"""
from __future__ import annotations

import math
from typing import Iterator

import torch
import torch.nn.functional as F
from torch.func import functional_call

from ..data import load_dataset
from ..errors import BenchError
from ..models import make_model
from . import streams
from .base import Task, TaskSetup, register
from .flat import FlatModel
from .gradients import cross_entropy, loop_gradients, vmap_gradients_with_aux


def batchify(stream: torch.Tensor, batch: int) -> torch.Tensor:
    """``[T]`` → ``[batch, T // batch]``: ``batch`` contiguous streams read side by side."""
    length = len(stream) // batch
    return stream[: length * batch].view(batch, length)


@register
class LanguageTask(Task):
    name = "wikitext2-lstm"
    options = {"emb": 650, "hidden": 650, "num_layers": 3, "dropout": 0.4, "tie_weights": True, "bptt": 30,
               "eval_batch": 10, "train_eval_tokens": 20000, "vectorize": "auto"}
    metrics = ("test_loss", "test_acc", "test_ppl")
    # the second without dropout: the vectorised path's fused nn.LSTM loop, the first its masks
    examples = ({"data": "split", "task_options": {"emb": 16, "hidden": 16, "num_layers": 2, "bptt": 5}},
                {"data": "split", "task_options": {"emb": 16, "hidden": 16, "num_layers": 2, "bptt": 5, "dropout": 0.0}})
    resources = dict(mem_mb=32000, runtime=24 * 60, gpus=1, cpus=8)
    dataset = "wikitext2"  # what it reads (as a supervised task's ``dataset``)
    vectorizable = True

    def __init__(self, setup: TaskSetup):
        super().__init__(setup)
        if setup.data != "split":
            raise BenchError(f"task {self.name!r} deals contiguous text shards; use data=split (got {setup.data!r})")
        opts = self.options
        self.data = load_dataset(self.dataset, setup.data_root, setup.seed)
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
        # [w, batch_size, tokens]: the local workers' shards, each read as batch_size parallel streams
        self.text = torch.stack([batchify(self.data.train[i * shard:(i + 1) * shard], setup.batch_size)
                                 for i in range(setup.lo, setup.hi)]).to(self.device)
        self.steps_per_epoch = (self.text.shape[2] - 1) // self.bptt
        if self.steps_per_epoch < 1:
            raise BenchError(f"training text too short: {shard} tokens per worker cannot fill one window of "
                             f"batch_size={setup.batch_size} × bptt={self.bptt}")
        self.train_size, self.test_size = len(self.data.train), len(self.data.test)
        # (h, c) of the local workers, each [w, num_layers, batch_size, hidden]; None before an epoch starts
        self.hidden: tuple[torch.Tensor, torch.Tensor] | None = None

    def init_params(self) -> torch.Tensor:
        return self.flat.get().to(self.device).repeat(self.setup.local_workers, 1)

    def start_epoch(self, epoch: int) -> None:
        h, c = self.model.init_state(self.setup.batch_size)
        w = self.setup.local_workers
        self.hidden = (h.repeat(w, 1, 1, 1), c.repeat(w, 1, 1, 1))

    def batches(self, epoch: int) -> Iterator[tuple[int, int]]:
        for step in range(self.steps_per_epoch):
            yield epoch, step

    def dropout_masks(self, epoch: int, step: int) -> list[torch.Tensor] | None:
        """Keep-masks of the local workers for one step (see LSTMLanguageModel.dropout_masks), each
        ``[w, batch_size, bptt, width]``; worker i's are a function of (seed, epoch, step, lo + i)."""
        if self.model.dropout == 0:
            return None
        keys = streams.worker_keys(self.setup.seed, epoch, step, range(self.setup.lo, self.setup.hi),
                                   streams.DROPOUT, self.device)
        return self.model.dropout_masks(streams.uniform(keys, (self.setup.batch_size, self.bptt,
                                                               self.model.mask_width)))

    def gradients(self, x: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, step = batch
        if self.gradient_path is None:
            self.prepare(x)
        if self.hidden is None:
            self.start_epoch(epoch)
        window = self.text[:, :, step * self.bptt:(step + 1) * self.bptt + 1]
        inputs, targets = window[..., :-1], window[..., 1:]
        masks = self.dropout_masks(epoch, step)
        h0, c0 = self.hidden
        model = self.model

        def loss_of(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

        if self.gradient_path == "vmap":
            def worker_loss(params, tokens, target, h, c, *worker_masks):
                logits, state = functional_call(model, params, (tokens, (h, c), list(worker_masks) or None),
                                                {"unrolled": True})
                return loss_of(logits, target), state

            grads, losses, (h, c) = vmap_gradients_with_aux(self.flat, worker_loss, x, inputs, targets, h0, c0,
                                                            *(masks or []))
            self.hidden = (h.detach(), c.detach())
            return grads, losses

        h_new, c_new = torch.empty_like(h0), torch.empty_like(c0)

        def one_worker(i: int) -> torch.Tensor:
            worker_masks = None if masks is None else [m[i] for m in masks]
            logits, (h, c) = model(inputs[i], (h0[i], c0[i]), worker_masks)
            h_new[i], c_new[i] = h.detach(), c.detach()
            return loss_of(logits, targets[i])

        grads, losses = loop_gradients(self.flat, x, one_worker)
        self.hidden = (h_new, c_new)
        return grads, losses

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
        return {**super().state_dict(), "hidden": self.hidden}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        hidden = state["hidden"]
        if isinstance(hidden, list):  # checkpoints before the stacked form: one (h, c) per worker
            hidden = tuple(torch.stack([pair[k] for pair in hidden]) for k in (0, 1))
        self.hidden = None if hidden is None else (hidden[0], hidden[1])
