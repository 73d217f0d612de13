"""Benchmark f of `bench perf`: the runner's whole training step against one model at the same total batch.

One step is what ``bench run`` does per step (``runner.Loop.step``): fetch the workers' batches (CIFAR:
random crop and flip of all of them in one gather), the gradients of all n workers (vectorised or the
per-worker loop, by ``task_options.vectorize``), and one Choco-sign round on a ring. The reference is ONE
model trained by the same runner at n = 1 with batch n·B and nothing to communicate: their ratio is what
simulating n workers costs over the compute the step cannot avoid [targets, GPU only: ResNet-20 at
64 × 32 vectorised <= 1.5x one ResNet-20 at batch 2048; the LSTM at n = 32 vectorised <= 2x one LSTM at
32x the batch]. Data: synthetic files in the real on-disk formats, in a temporary directory.
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Callable

import torch

from ..algorithms import reference_method
from ..data import load_dataset
from ..data.fake import write_cifar, write_wikitext
from ..models.lstm import WIKITEXT2_VOCAB
from ..run.config import resolve
from ..run.runner import Loop
from ..run.resolved import resolve_run
from ..run.setup import build, device_of
from .timing import figure, ratio_figure, repeat

# Sizes of f by where they run (g's are in cpu_target.py); every figure records the sizes it ran at.
# CUDA: the paper's runs. CPU: the same n and ResNet-20 with the per-worker batch divided by 8 (the
# paper's 64 × 32 is 2048 images, seconds per step on 2 cores), and the LSTM of config/social-lstm.yaml's
# CPU version (2 × 64) at its batch 8 over 2,000 words (WikiText-2's 33,278 made the decoder about 10 s
# a step on 2 cores, hiding the rest of the step). --quick: a smoke test of the benchmarks themselves.
PAPER = {"step_model": "resnet20", "step_configs": [[8, 128], [64, 32]],
         "lstm": {"n": 32, "batch": 32, "emb": 650, "hidden": 650, "num_layers": 3, "vocab": WIKITEXT2_VOCAB}}
CPU = {"step_model": "resnet20", "step_configs": [[8, 16], [64, 4]],
       "lstm": {"n": 32, "batch": 8, "emb": 64, "hidden": 64, "num_layers": 2, "vocab": 2000}}
QUICK = {"step_model": "resnet8", "step_configs": [[4, 4], [8, 2]],
         "lstm": {"n": 4, "batch": 2, "emb": 16, "hidden": 16, "num_layers": 1, "vocab": 50}}
RESNET_TARGET = (64, 32, 1.5)  # (n, batch, ratio) of the GPU target
LSTM_TARGET = (32, 2.0)  # (n, ratio): n workers vectorised against one LSTM at n times the batch

# what the paper's runs train with, so that the step does the same work (lr and γ do not change its cost)
CIFAR_RUN = {"algorithm": "choco", "compressor": "sign", "topology": "ring", "gamma": 0.5, "lr": 0.1,
             "momentum": 0.9, "nesterov": False, "weight_decay": 1e-4}
LSTM_RUN = {"task": "wikitext2-lstm", "algorithm": "choco", "compressor": "sign", "topology": "ring",
            "gamma": 0.5, "lr": 1.0, "grad_clip": 0.4, "data": "split", "momentum": 0.0, "weight_decay": 0.0}
# the reference: one model, nothing to send (an all-reduce over one worker is a copy of its row)
ONE_MODEL = {"nodes": 1, "algorithm": reference_method(), "compressor": "none", "topology": "complete"}
WORDS_PER_LINE = 12  # and <eos>
BPTT = 30  # the task's default window


def write_cifar_files(root: Path, train_images: int, test_images: int = 16) -> Path:
    """CIFAR-10 python batches holding at least ``train_images`` training images (five files)."""
    write_cifar(root / "cifar-10-batches-py", per_batch=math.ceil(train_images / 5), test_size=test_images)
    return root


def write_wikitext_files(root: Path, train_tokens: int, vocab: int) -> Path:
    """Token files whose training text has at least ``train_tokens`` tokens and a vocabulary of ``vocab``
    (the decoder's cost grows with it): every word once, then random lines."""
    lines = math.ceil(train_tokens / (WORDS_PER_LINE + 1)) + 1
    write_wikitext(root, lines=lines, vocab=vocab - 2, words_per_line=WORDS_PER_LINE, eval_lines=4,
                   cover_vocab=True)  # the loader adds <eos> and <unk>
    return root


class Stepper:
    """One run's parts, stepped by the runner itself on batches that cycle through epoch 0."""

    def __init__(self, settings: dict, out: Path, device: str):
        cfg = resolve({}, {}, {**settings, "device": device, "quiet": True, "seed": 0})
        dev = device_of(device)
        self.loop = Loop(cfg, out, build(resolve_run(cfg)), dev, None)
        self.task = self.loop.p.task
        self._batches = iter(())

    def _next_batch(self):
        try:
            return next(self._batches)
        except StopIteration:
            self._batches = self.task.batches(0)
            return next(self._batches)

    def step(self) -> None:
        self.loop.step(self._next_batch())

    def gradients(self) -> None:
        self.task.gradients(self.loop.p.algo.x, self._next_batch())

    def path(self) -> dict:
        """The gradient path the task actually took, and why (tasks/gradients.py)."""
        info = self.task.gradient_path_info or {}
        return {"path": self.task.gradient_path, "path_reason": info.get("reason")}


def paired_times(calls: dict[str, Callable[[], None]], repeats: int, device: str) -> dict[str, list[float]]:
    """Seconds per call of each entry; each repeat times all of them back to back (paired ratios)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for r in range(repeats):
        for name, call in calls.items():
            times[name] += repeat(call, 1, torch.device(device), warmup=1 if r == 0 else 0)
    return times


def _vectorize(settings: dict, value: bool) -> dict:
    return {**settings, "task_options": {**settings.get("task_options", {}), "vectorize": value}}


def step_vs_one(label: str, settings: dict, n: int, batch: int, repeats: int, device: str, work: Path,
                size: dict, target: float | None) -> dict[str, dict]:
    """Figures ``{label}_{vectorized,loop}_vs_one`` (ratios) and ``{label}_{vectorized,loop,one}_s``."""
    runs = {"vectorized": {**_vectorize(settings, True), "nodes": n, "batch_size": batch},
            "loop": {**_vectorize(settings, False), "nodes": n, "batch_size": batch},
            "one": {**_vectorize(settings, False), **ONE_MODEL, "batch_size": n * batch}}
    steppers = {name: Stepper(cfg, work / f"{label}-{name}", device) for name, cfg in runs.items()}
    times = paired_times({name: s.step for name, s in steppers.items()}, repeats, device)
    size = {**size, "n": n, "batch": batch, "total_batch": n * batch}
    one = {"n": 1, "batch": n * batch, **steppers["one"].path()}
    figures = {}
    for name in ("vectorized", "loop"):
        extra = {**size, **steppers[name].path(), "requested": f"vectorize={name == 'vectorized'}", "one": one}
        if name == "vectorized" and target is not None:
            extra["target"] = target
        figures[f"{label}_{name}_vs_one"] = ratio_figure(times[name], times["one"],
                                                         f"x one model at batch {n * batch}", False, **extra)
        figures[f"{label}_{name}_s"] = figure(times[name], "s/step", False, "absolute", **extra)
    figures[f"{label}_one_s"] = figure(times["one"], "s/step", False, "absolute", **{**size, **one})
    return figures


def resnet_target(model: str, n: int, batch: int, device: str) -> float | None:
    """The GPU target, where the step runs at its sizes (on CPU the ratio is recorded without one)."""
    on_gpu = torch.device(device).type == "cuda"
    return RESNET_TARGET[2] if on_gpu and model == "resnet20" and (n, batch) == RESNET_TARGET[:2] else None


def lstm_target(n: int, device: str) -> float | None:
    return LSTM_TARGET[1] if torch.device(device).type == "cuda" and n == LSTM_TARGET[0] else None


def resnet_steps(sizes: dict, repeats: int, device: str, progress=print) -> dict[str, dict]:
    model, configs = sizes["step_model"], sizes["step_configs"]
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # two steps an epoch at the largest total batch, so that the batches cycle as in a run
        root = write_cifar_files(work / "data", 2 * max(n * b for n, b in configs))
        for n, batch in configs:
            target = resnet_target(model, n, batch, device)
            label = f"f.{model}_n{n}"
            figures.update(step_vs_one(label, {**CIFAR_RUN, "task": f"cifar10-{model}", "data_root": str(root)},
                                       n, batch, repeats, device, work, {"model": model}, target))
            progress(_line(label, figures, n, batch))
    return figures


def lstm_steps(sizes: dict, repeats: int, device: str, progress=print) -> dict[str, dict]:
    spec = sizes["lstm"]
    n, batch = spec["n"], spec["batch"]
    dims = {k: spec[k] for k in ("emb", "hidden", "num_layers")}
    target = lstm_target(n, device)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # two BPTT windows an epoch for every worker's streams
        root = write_wikitext_files(work / "data", n * batch * (2 * BPTT + 2), spec["vocab"])
        settings = {**LSTM_RUN, "data_root": str(root), "task_options": {**dims, "bptt": BPTT}}
        label = f"f.lstm_n{n}"
        vocab = len(load_dataset("wikitext2", str(root), 0).vocab)  # as the task reads it
        size = {"model": "lstm {num_layers}x{hidden}".format(**dims), **dims, "bptt": BPTT, "vocab": vocab}
        figures = step_vs_one(label, settings, n, batch, repeats, device, work, size, target)
    progress(_line(label, figures, n, batch))
    return figures


def _line(label: str, figures: dict, n: int, batch: int) -> str:
    vec, loop = figures[f"{label}_vectorized_vs_one"], figures[f"{label}_loop_vs_one"]
    return (f"f  {label[2:]} × {batch} step: vectorize=true ({vec['path']}) {vec['median']:.2f}x, "
            f"vectorize=false ({loop['path']}) {loop['median']:.2f}x one model at batch {n * batch} "
            f"({figures[f'{label}_one_s']['median']:.3f} s)")
