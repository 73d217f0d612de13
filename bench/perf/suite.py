"""The fixed benchmark set of `bench perf` (targets in brackets):
a. throughput of Choco-sign on a ring, mnist1d-mlp: simulated vs one gloo process per worker
   (n = 4, 8, 16; simulated alone at n = 64) [simulated >= 5x per-process at n = 16];
b. one communication round of Choco (compress + gossip + update) at n = 64, d = 10^6 against one
   copy of the [n, d] float32 state [<= 8x for sign, top:0.01, qsgd:4; rand:0.01 timed without a target];
c. the step of Choco-sign against local SGD without communication at n = 64, bare and with Choco's own
   momentum and weight decay [<= 1.25x];
d. peak memory of n = 64 on mnist1d-mlp [< 2 GiB];
e. gradients of 64 bare ResNet-20s, one vmap call against a loop over workers.
The training step of the real tasks (f) and the CPU target (g) are in training.py and cpu_target.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import torch

from ..run.config import resolve
from ..run.resolved import resolve_run
from ..run.setup import build, device_of
from .timing import figure, ratio_figure, repeat

TASK_SETTINGS = {"task": "mnist1d-mlp", "algorithm": "choco", "compressor": "sign", "topology": "ring",
                 "gamma": 0.5, "batch_size": 32, "lr": 0.05, "quiet": True}


def _parts(n: int, device: str, **overrides):
    cfg = resolve({}, {}, {**TASK_SETTINGS, "nodes": n, "device": device, **overrides})
    device_of(device)  # one line where this machine has no such device
    return build(resolve_run(cfg))


def _train_steps(parts, steps: int, communicate: bool = True, local_step: bool = False) -> None:
    """``steps`` training steps of ``parts``: the method's own (``communicate``), else local SGD without
    communication: ``x −= η g`` (bare), or with the method's own local step (``local_step``: its momentum and
    weight decay, the same LocalStep the method applies before it communicates)."""
    task, algo = parts.task, parts.algo
    batches = task.batches(0)
    for _ in range(steps):
        try:
            batch = next(batches)
        except StopIteration:
            batches = task.batches(0)
            batch = next(batches)
        grads, _ = task.gradients(algo.x, batch)
        if communicate:
            algo.step(grads, 0.05)
        elif local_step:
            algo.local.descend(algo.x, grads, 0.05)
        else:
            algo.x.sub_(grads, alpha=0.05)  # local SGD: the same gradient work, no compression, no gossip


def throughput_sim(n: int, steps: int, repeats: int, device: str) -> dict:
    parts = _parts(n, device)
    times = repeat(lambda: _train_steps(parts, steps), repeats, torch.device(device))
    return figure([n * steps / t for t in times], "worker-steps/s", True, "absolute")


def throughput_processes(n: int, steps: int, repeats: int) -> dict:
    """One gloo process per worker on this machine, the way the paper's code runs."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        from ..run.dist import launch_ranks

        code = launch_ranks([sys.executable, "-m", "bench.perf.dist_worker", out, str(n), str(steps), str(repeats)],
                            n, grace_s=60)
        if code != 0:
            raise RuntimeError(f"per-process benchmark with {n} processes failed (exit {code})")
        with open(out) as handle:
            times = json.load(handle)
    return figure([n * steps / t for t in times], "worker-steps/s", True, "absolute")


def communication_round(compressor: str, n: int, d: int, repeats: int, device: str,
                        ratio_target: float | None = 8.0) -> tuple[dict, dict]:
    from ..algorithms import make_algorithm
    from ..comm import SimulatedCommunicator
    from ..compressors import make_compressor
    from ..topology import make_topology

    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(n, d, generator=gen, device=dev)
    algo = make_algorithm("choco", x, SimulatedCommunicator(make_topology("ring", n)),
                          compressor=make_compressor(compressor, contraction=True), options={"gamma": 0.5},
                          generator=gen)
    target = torch.empty_like(x)
    rounds, copies = [], []
    for _ in range(repeats):  # paired: each repeat times a round and a copy back to back
        rounds += repeat(lambda: algo.step(None, 0.0), 1, dev, warmup=1 if not rounds else 0)
        copies += repeat(lambda: target.copy_(x), 1, dev, warmup=1 if not copies else 0)
    ratio = ratio_figure(rounds, copies, "x copy time", False, target=ratio_target)
    return ratio, figure(rounds, "s", False, "absolute")


def overhead(n: int, steps: int, repeats: int, device: str) -> tuple[dict, dict]:
    """The Choco-sign step against local SGD without communication, paired repeats: (against the bare step
    ``x −= η g``, as this figure has always been taken; against local SGD with Choco's own local step, Nesterov
    momentum and weight decay, so that the ratio is what communicating adds)."""
    choco, local = _parts(n, device), _parts(n, device, algorithm="dpsgd", compressor="none")
    dev = torch.device(device)
    with_comm, bare, stepped = [], [], []
    for _ in range(repeats):
        with_comm += repeat(lambda: _train_steps(choco, steps), 1, dev, warmup=1 if not with_comm else 0)
        bare += repeat(lambda: _train_steps(local, steps, communicate=False), 1, dev, warmup=1 if not bare else 0)
        stepped += repeat(lambda: _train_steps(local, steps, communicate=False, local_step=True), 1, dev,
                          warmup=1 if not stepped else 0)
    return (ratio_figure(with_comm, bare, "x local SGD step", False, target=1.25),
            ratio_figure(with_comm, stepped, "x local SGD step with the same momentum and weight decay", False,
                         target=1.25))


def peak_memory(n: int, steps: int, device: str) -> dict:
    """Peak memory of a fresh process running n workers: its resident-set high-water mark on CPU
    (VmHWM: getrusage's ru_maxrss would carry over the parent's peak across exec), the allocator's
    peak on CUDA."""
    code = ("import torch\n"
            "from bench.perf.suite import _parts, _train_steps\n"
            f"p = _parts({n}, {device!r})\n"
            f"_train_steps(p, {steps})\n"
            f"if {device!r}.startswith('cuda'):\n"
            "    print(torch.cuda.max_memory_allocated())\n"
            "else:\n"
            "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
            "    print(int(hwm.split()[1]) * 1024)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    gib = int(done.stdout.strip().splitlines()[-1]) / 2**30
    return figure([gib], "GiB", False, "absolute", target=2.0)


def resnet_vectorised_vs_loop(n: int, batch: int, repeats: int, device: str) -> tuple[dict, dict, dict]:
    """Gradients of n bare ResNet-20s on CIFAR-shaped random tensors: one vmap call vs a loop over workers,
    BatchNorm on batch statistics only. The task's own paths (running statistics carried through vmap,
    fetch and augmentation included) are timed by f and g."""
    from torch.func import functional_call, grad, vmap

    from ..models import resnet_cifar
    from ..tasks.flat import FlatModel

    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(0)
    torch.manual_seed(0)
    model = resnet_cifar(20).to(dev)
    torch.func.replace_all_batch_norm_modules_(model)
    flat = FlatModel(model)
    x = flat.get().to(dev).repeat(n, 1)
    images = torch.randn(n, batch, 3, 32, 32, generator=gen, device=dev)
    labels = torch.randint(0, 10, (n, batch), generator=gen, device=dev)

    def loss(row, xb, yb):
        return torch.nn.functional.cross_entropy(functional_call(model, flat.views(row), (xb,)), yb)

    vectorised = vmap(grad(loss))

    def loop():
        for i in range(n):
            model.zero_grad(set_to_none=True)
            flat.load(x[i])
            torch.nn.functional.cross_entropy(model(images[i]), labels[i]).backward()

    fast = repeat(lambda: vectorised(x, images, labels), repeats, dev)
    slow = repeat(loop, repeats, dev)
    return (ratio_figure(slow, fast, "x faster than the loop", True),
            figure(fast, "s", False, "absolute"), figure(slow, "s", False, "absolute"))
