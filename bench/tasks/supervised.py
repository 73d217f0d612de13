"""Supervised tasks on in-memory or folder data sets: MNIST-1D, digits, CIFAR-10, ImageNet (the synthetic convex
problems build on them: synthetic.py)."""
from __future__ import annotations

import math
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch.func import vmap

from ..data import load_dataset
from ..errors import BenchError
from ..data.partition import WorkerBatches
from ..models import make_model, no_weight_decay_mask
from . import streams
from .base import Task, TaskSetup, register
from .batchnorm import check_batchnorm_batch
from .flat import FlatModel
from .gradients import cross_entropy, loop_gradients, vmap_gradients, vmap_outputs

SUPERVISED = {"eval_batch": 1000, "vectorize": "auto"}  # the options of every image/vector classifier
SMALL_MNIST1D = ({"task_options": {"n_train": 200, "n_test": 100}},)  # a small build for the generic tests
TRAIN_EVAL_SAMPLES = 5000  # training loss of a model is measured on this many fixed samples
VALIDATION_SEED = 0x7A11D  # the validation split is the same for every run seed, method and trial


def validation_split(size: int, fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices of a training set of ``size``: a fixed random ``fraction`` held
    out (at least one example, at least one left to train on), both sorted."""
    held = max(1, round(fraction * size))
    if held >= size:
        raise BenchError(f"val_fraction={fraction} holds out all {size} training examples; use a smaller fraction")
    order = torch.randperm(size, generator=torch.Generator().manual_seed(VALIDATION_SEED))
    return order[held:].sort().values, order[:held].sort().values


def half_mean_square(residual: torch.Tensor, per_row: bool = False) -> torch.Tensor:
    """The mse loss ½·mean(r²) of a residual r = o − y: over everything, or one mean per leading row."""
    squares = residual.pow(2)
    return 0.5 * (squares.flatten(1).mean(1) if per_row else squares.mean())


class SupervisedTask(Task):
    dataset: str
    model_name: str
    loss_kind: str = "ce"  # ce | mse | bce
    augment: bool = False  # CIFAR-style random crop and flip on training batches
    vectorizable = True
    # which of its options go to the data set's loader and to the model
    dataset_options: tuple[str, ...] = ()
    model_options: tuple[str, ...] = ()

    def __init__(self, setup: TaskSetup):
        super().__init__(setup)
        opts = self.options
        self.data = load_dataset(self.dataset, setup.data_root, setup.seed,
                                 **{k: opts[k] for k in self.dataset_options if k in opts})
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(setup.seed)  # the initial model is a function of the seed alone
            self.model = make_model(self.model_name, **self.model_kwargs()).to(self.device)
        self.flat = FlatModel(self.model)
        self.d, self.segments = self.flat.d, self.flat.segments
        self.lazy = not hasattr(self.data, "train_x")
        train_y = self.data.train.targets if self.lazy else self.data.train_y
        self.has_validation = setup.val_fraction > 0
        if self.has_validation:
            if self.lazy:
                raise BenchError(f"val_fraction needs a data set held in memory; {self.name} reads its images "
                                 "from disk (hold out a folder of images instead)")
            keep, held = validation_split(len(train_y), setup.val_fraction)
            self.val_x, self.val_y = self.data.train_x[held].to(self.device), self.data.train_y[held].to(self.device)
            train_x, train_y = self.data.train_x[keep], self.data.train_y[keep]
        elif not self.lazy:
            train_x = self.data.train_x
        self.train_size = len(train_y)
        self.test_size = len(self.data.test) if self.lazy else len(self.data.test_y)
        self.partition = WorkerBatches(train_y, setup.n_workers, setup.batch_size, setup.data, setup.seed)
        self._kept: tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]] | None = None  # fetch's last full batch
        self.steps_per_epoch = self.partition.steps_per_epoch
        shape = (3, self.data.train.size, self.data.train.size) if self.lazy else tuple(self.data.train_x.shape[1:])
        check_batchnorm_batch(self.name, self.model, shape, setup.batch_size)  # before a run says it is running
        self.buffers = (self.flat.get_buffers().to(self.device).repeat(setup.local_workers, 1)
                        if self.flat.nb else None)
        if not self.lazy:
            self.train_x, self.train_y = train_x.to(self.device), train_y.to(self.device)
            self.test_x, self.test_y = self.data.test_x.to(self.device), self.data.test_y.to(self.device)
            gen = torch.Generator().manual_seed(setup.seed)
            self.train_eval_idx = torch.randperm(self.train_size, generator=gen)[:TRAIN_EVAL_SAMPLES].to(self.device)

    def model_kwargs(self) -> dict[str, Any]:
        return {k: self.options[k] for k in self.model_options if k in self.options}

    def decay_mask(self) -> torch.Tensor:
        return self.flat.decay_mask(no_weight_decay_mask(self.model)).to(self.device)

    def init_params(self) -> torch.Tensor:
        return self.flat.get().to(self.device).repeat(self.setup.local_workers, 1)

    # -- batches ---------------------------------------------------------------------------
    def batches(self, epoch: int) -> Iterator[tuple[int, int, torch.Tensor]]:
        if self.lazy:
            self.data.train.set_epoch(epoch)
        for step, idx in enumerate(self.partition.epoch(epoch)):
            yield epoch, step, idx

    def fetch(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, step, idx = batch
        if self._kept is not None and self._kept[0] is idx:
            return self._kept[1]  # a fixed deal's full batch, the same every epoch (WorkerBatches.epoch)
        whole = idx
        idx = idx[self.setup.lo:self.setup.hi]
        if self.lazy:
            items = [self.data.train[int(i)] for i in idx.reshape(-1)]
            xs = torch.stack([it[0] for it in items]).to(self.device)
            ys = torch.tensor([it[1] for it in items], device=self.device)
            return xs.view(*idx.shape, *xs.shape[1:]), ys.view(idx.shape)
        idx = idx.to(self.device)
        flat = idx.reshape(-1)  # index_select: the same rows as x[idx], 4-5x faster on CPU than advanced indexing
        xs, ys = self.data.as_float(self.train_x.index_select(0, flat)), self.train_y.index_select(0, flat)
        xs, ys = xs.view(*idx.shape, *xs.shape[1:]), ys.view(idx.shape)
        if self.augment:
            # draws keyed by the global worker index: a process holding some workers draws what the simulation does
            keys = streams.worker_keys(self.setup.seed, epoch, step, range(self.setup.lo, self.setup.hi),
                                       streams.AUGMENT, self.device)
            xs = random_crop_flip(xs, keys)
        elif self.partition.full_batch:
            self._kept = (whole, (xs, ys))  # nothing drawn: read again at the next epoch's step, which is this one
        return xs, ys

    # -- loss and gradients ----------------------------------------------------------------
    def loss(self, out: torch.Tensor, y: torch.Tensor, per_row: bool = False) -> torch.Tensor:
        """The batch's mean loss; ``per_row``: one mean per leading row of ``out [n, B]`` (mse and bce, for the
        linear models' batched path)."""
        if self.loss_kind == "ce":
            if per_row:
                raise ValueError("per-row losses are for mse and bce")
            return cross_entropy(out, y)
        if self.loss_kind == "mse":
            return half_mean_square(out - y, per_row)
        if per_row:
            return F.binary_cross_entropy_with_logits(out, y.to(out.dtype), reduction="none").flatten(1).mean(1)
        return F.binary_cross_entropy_with_logits(out, y.to(out.dtype))

    def penalty(self, row: torch.Tensor) -> torch.Tensor | None:
        return None

    def gradients(self, x: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
        if self.gradient_path is None:
            self.prepare(x)
        inputs, targets = self.fetch(batch)
        penalised = self.penalty(x[0]) is not None  # whether the task has a penalty term at all
        if self.gradient_path == "vmap":
            pen = self.penalty if penalised else None
            return vmap_gradients(self.flat, self.loss, x, inputs, targets, pen, self.buffers)

        def worker_loss(i: int) -> torch.Tensor:
            out = self.model(inputs[i])
            # torch's own cross-entropy off vmap: the same value to float rounding as the vmap-safe form, and
            # 50-60 µs less of the MLP's 500 µs step on a 2-core CPU (docs/performance.md, h)
            loss = F.cross_entropy(out, targets[i]) if self.loss_kind == "ce" else self.loss(out, targets[i])
            if not penalised:
                return loss
            return loss + self.penalty(torch.cat([p.reshape(-1) for p in self.flat.params]))

        return loop_gradients(self.flat, x, worker_loss, self.buffers)

    # -- evaluation ------------------------------------------------------------------------
    def averaged_buffers(self) -> torch.Tensor | None:
        # BatchNorm statistics of the averaged model: the mean of the workers' running statistics
        return None if self.buffers is None else self.buffers.mean(dim=0)

    def worker_buffers(self, i: int) -> torch.Tensor | None:
        return None if self.buffers is None else self.buffers[i]

    def local_buffers(self) -> torch.Tensor | None:
        return self.buffers

    @torch.no_grad()
    def _score(self, xs_ys, flat_params: torch.Tensor) -> tuple[float, float, int]:
        loss_sum, correct, count = 0.0, 0, 0
        for xb, yb in xs_ys:
            out = self.model(xb)
            loss_sum += float(self.loss(out, yb)) * len(yb)
            if self.loss_kind == "ce":
                correct += int((out.argmax(dim=1) == yb).sum())
            elif self.loss_kind == "bce":
                correct += int(((out > 0).long() == yb.long()).sum())
            count += len(yb)
        pen = self.penalty(flat_params)
        return loss_sum / count + (float(pen) if pen is not None else 0.0), correct / count, count

    def _chunks(self, x: torch.Tensor, y: torch.Tensor):
        size = int(self.options["eval_batch"])
        for start in range(0, len(y), size):
            yield self.data.as_float(x[start:start + size]), y[start:start + size]

    def _test_chunks(self):
        if not self.lazy:
            return self._chunks(self.test_x, self.test_y)
        return ((torch.stack([self.data.test[j][0] for j in range(s, min(s + 64, self.test_size))]).to(self.device),
                 torch.tensor([self.data.test[j][1] for j in range(s, min(s + 64, self.test_size))],
                              device=self.device)) for s in range(0, self.test_size, 64))

    def evaluate(self, flat: torch.Tensor, buffers: torch.Tensor | None = None) -> dict[str, float]:
        self.flat.load(flat)
        if buffers is not None and buffers.numel():
            self.flat.load_buffers(buffers)
        self.model.eval()
        test_loss, test_acc, _ = self._score(self._test_chunks(), flat)
        out = {"test_loss": test_loss, "test_acc": test_acc if self.loss_kind != "mse" else math.nan}
        if self.has_validation:
            val_loss, val_acc, _ = self._score(self._chunks(self.val_x, self.val_y), flat)
            out.update(val_loss=val_loss, val_acc=val_acc if self.loss_kind != "mse" else math.nan)
        if not self.lazy:
            idx = self.train_eval_idx
            out["train_loss"] = self._score(self._chunks(self.train_x[idx], self.train_y[idx]), flat)[0]
        return out

    @torch.no_grad()
    def evaluate_workers(self, x: torch.Tensor, buffers: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """All local models on the whole test set in one vectorised pass per chunk of test data (the
        chunk shrinks with the number of models, so memory stays that of one model's evaluation)."""
        if self.lazy or self.options.get("vectorize", "auto") is False:  # streamed data, or loops asked for
            return super().evaluate_workers(x, buffers)
        k = len(x)
        loss_sum = torch.zeros(k, dtype=torch.float64, device=x.device)
        correct = torch.zeros(k, dtype=torch.float64, device=x.device)
        size = max(1, int(self.options["eval_batch"]) // k)
        for start in range(0, self.test_size, size):
            xb = self.data.as_float(self.test_x[start:start + size])
            yb = self.test_y[start:start + size]
            out = vmap_outputs(self.flat, x, xb, buffers)
            loss_sum += vmap(self.loss, in_dims=(0, None))(out, yb).double() * len(yb)  # one call, every model
            if self.loss_kind == "ce":
                correct += (out.argmax(dim=-1) == yb).sum(dim=1).double()
            elif self.loss_kind == "bce":
                correct += ((out > 0).long() == yb.long()).flatten(1).sum(dim=1).double()
        loss = loss_sum / self.test_size
        pens = [self.penalty(x[i]) for i in range(k)]
        if pens and pens[0] is not None:
            loss = loss + torch.tensor([float(pen) for pen in pens], dtype=torch.float64, device=x.device)
        acc = correct / self.test_size if self.loss_kind != "mse" else torch.full_like(loss, math.nan)
        return {"test_loss": loss.cpu(), "test_acc": acc.cpu()}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "buffers": self.buffers}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.buffers = state["buffers"]


def random_crop_flip(images: torch.Tensor, keys: torch.Tensor, pad: int = 4) -> torch.Tensor:
    """Random ``pad``-pixel-shift crop (zero padding) and horizontal flip of every image of
    ``[w, B, C, H, W]`` in one gather; worker i's draws come from ``keys[i]`` (see streams)."""
    w, b, c, h, wd = images.shape
    u = streams.uniform(keys, (b, 3))  # per image: row shift, column shift, flip
    shifts = (u[..., :2] * (2 * pad + 1)).long().clamp_(max=2 * pad)
    oy, ox = shifts[..., 0].reshape(-1), shifts[..., 1].reshape(-1)
    flip = (u[..., 2] < 0.5).reshape(-1)
    flat = images.reshape(w * b, c, h, wd)
    padded = F.pad(flat, (pad, pad, pad, pad))
    rows = oy[:, None] + torch.arange(h, device=images.device)[None, :]
    cols = ox[:, None] + torch.arange(wd, device=images.device)[None, :]
    cols = torch.where(flip[:, None], cols.flip(1), cols)
    index = torch.arange(w * b, device=images.device)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[index, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).reshape(w, b, c, h, wd).contiguous()


def _register(name: str, dataset: str, model: str, model_kwargs: dict[str, Any], **attrs) -> None:
    """A supervised task of ``dataset`` and ``model``; ``attrs`` its options with their defaults, examples and
    resources (Task's class attributes) and how it feeds them to the data set and the model."""
    fixed = model_kwargs

    def model_kwargs_fn(self) -> dict[str, Any]:
        return {**fixed, **{k: self.options[k] for k in self.model_options if k in self.options}}

    register(type(name, (SupervisedTask,), {"name": name, "dataset": dataset, "model_name": model,
                                            "model_kwargs": model_kwargs_fn, **attrs}))


# in the order `known: ...` lists them, after the language task
_register("mnist1d-mlp", "mnist1d", "mlp", {"in_features": 40, "num_classes": 10},
          options={**SUPERVISED, "n_train": 4000, "n_test": 1000, "hidden": (100, 100)}, examples=SMALL_MNIST1D,
          dataset_options=("n_train", "n_test"), model_options=("hidden",))
_register("mnist1d-cnn", "mnist1d", "cnn1d", {"in_length": 40, "num_classes": 10},
          options={**SUPERVISED, "n_train": 4000, "n_test": 1000, "channels": 25}, examples=SMALL_MNIST1D,
          dataset_options=("n_train", "n_test"), model_options=("channels",))
_register("digits-mlp", "digits", "mlp", {"in_features": 64, "num_classes": 10},
          options={**SUPERVISED, "hidden": (64,)}, model_options=("hidden",))
_register("cifar10-resnet20", "cifar10", "resnet20", {"num_classes": 10}, augment=True,
          options=dict(SUPERVISED), resources=dict(mem_mb=16000, runtime=24 * 60, gpus=1, cpus=8))
_register("cifar10-resnet8", "cifar10", "resnet8", {"num_classes": 10}, augment=True,
          options=dict(SUPERVISED), resources=dict(mem_mb=16000, runtime=12 * 60, gpus=1, cpus=8))
_register("imagenet-resnet50", "imagenet", "resnet50", {}, dataset_options=("size",),
          options={**SUPERVISED, "size": 224, "eval_batch": 64},
          examples=({"nodes": 2, "batch_size": 2, "task_options": {"size": 32}},),
          resources=dict(mem_mb=64000, runtime=72 * 60, gpus=1, cpus=16))
