"""The runner: seeding, the step loop, LR schedule, evaluation cadence, divergence, checkpoints,
progress, and the run directory (Contract 2). Algorithms and tasks stay free of all of it."""
from __future__ import annotations

import itertools
import math
import signal
import sys
import time
from pathlib import Path

import torch

from ..algorithms import LocalStep, LocalStepConfig, make_algorithm
from ..comm import SimulatedCommunicator, make_network
from ..compressors import make_compressor, measure_delta
from ..errors import BenchError
from ..tasks import TaskSetup, make_task
from ..topology import make_topology
from .config import RunConfig
from .evaluation import Counters, evaluation_row, local_sample
from .outputs import (load_checkpoint, now, provenance, read_json, save_checkpoint, write_json, write_metrics)
from .progress import Progress
from .schedule import lr_at, resolve_gamma

FINAL = ("completed", "diverged")


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def clip_rows_(grads: torch.Tensor, max_norm: float) -> None:
    """Clip each worker's gradient (a row) to ``max_norm`` in place, as clip_grad_norm_ does per model."""
    norms = grads.norm(dim=1, keepdim=True)
    grads.mul_(torch.clamp(max_norm / (norms + 1e-12), max=1.0))


def _device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchError(f"device={name!r} but no CUDA GPU is available here; use --device cpu")
    return device


def run(cfg: RunConfig, out: Path) -> int:
    """Train (or resume, or recognise as done) one run in ``out``; returns the exit status."""
    out = Path(out)
    previous = read_json(out / "run.json")
    if previous is not None and previous.get("fingerprint") != cfg.fingerprint():
        raise BenchError(f"{out} holds run {previous.get('run_id')!r} with other settings; use another --out")
    if previous is not None and previous.get("status") in FINAL and (out / "metrics.parquet").exists():
        if not cfg.quiet:
            print(f"{out}: already {previous['status']}, nothing to do", file=sys.stderr)
        return 0
    device = _device(cfg.device)

    topology = make_topology(cfg.topology, cfg.nodes, weights=cfg.weights, seed=cfg.seed)
    compressor = make_compressor(cfg.compressor, algorithm=cfg.algorithm)
    task = make_task(cfg.task, TaskSetup(n_workers=cfg.nodes, batch_size=cfg.batch_size, data=cfg.data,
                                         seed=cfg.seed, device=cfg.device, data_root=cfg.data_root,
                                         options=cfg.task_options))
    gamma, gamma_source = resolve_gamma(cfg, topology, compressor)
    comm = SimulatedCommunicator(topology, make_network(cfg.network))
    local = LocalStep(LocalStepConfig(cfg.momentum, cfg.nesterov, cfg.weight_decay),
                      decay_mask=task.decay_mask() if cfg.weight_decay else None)
    options = {"gamma": gamma, "order": cfg.order} if cfg.algorithm == "choco" else (
        {"order": cfg.order} if cfg.algorithm == "dpsgd" else {})
    generator = torch.Generator(device=device).manual_seed(cfg.seed + 1)  # compression randomness
    x0 = task.init_params()
    algo = make_algorithm(cfg.algorithm, x0, comm, compressor, local, options, generator,
                          segments=task.segments if cfg.per_layer else None)

    out.mkdir(parents=True, exist_ok=True)
    spe = task.steps_per_epoch
    total = max(1, math.ceil(cfg.epochs * spe))
    eval_every = max(1, round(cfg.eval_every * spe))
    ckpt_every = max(1, round(cfg.checkpoint_every * spe))
    local_workers = local_sample(cfg.nodes, cfg.eval_local_workers) if task.has_gradient else []
    counters = Counters()
    checkpoint = out / "checkpoint.pt"
    if checkpoint.exists():
        state = load_checkpoint(checkpoint, device)
        if state["fingerprint"] != cfg.fingerprint():
            raise BenchError(f"{checkpoint} belongs to other settings; remove it or use another --out")
        algo.load_state_dict(state["algo"])
        task.load_state_dict(state["task"])
        generator.set_state(state["generator"].cpu())
        counters = Counters(**state["counters"])
    else:
        counters.initial_distance = float(((x0 - x0.mean(0)) ** 2).sum(1).mean())

    delta_gen = torch.Generator(device=device).manual_seed(cfg.seed + 2)
    sample = torch.randn(min(cfg.nodes, 4), task.d, generator=delta_gen, device=device)
    record = {
        "run_id": cfg.run_id(), "fingerprint": cfg.fingerprint(), "status": "running", "config": cfg.to_dict(),
        "topology": {k: v for k, v in topology.describe().items()
                     if k in ("name", "n", "weights", "spectral_gap", "beta", "max_degree", "num_edges")},
        "compressor": {**compressor.describe(), "delta_measured": measure_delta(
            compressor, sample, delta_gen, task.segments if cfg.per_layer else None)},
        "gamma": {"value": gamma, "source": gamma_source},
        "task": task.describe(),
        "evaluation": {"every_steps": eval_every, "local_workers": local_workers,
                       "averaged_model_buffers": "mean of the workers' BatchNorm running statistics"
                       if task.averaged_buffers() is not None else None,
                       "train_loss": "averaged model on a fixed training subset; train_loss_workers: "
                                     "mean minibatch loss of the workers since the previous evaluation"},
        "steps_per_epoch": spe, "total_steps": total, "network": comm.network.describe(),
        "provenance": provenance(device), "start_time": (previous or {}).get("start_time") or now(),
    }
    write_json(out / "run.json", record)

    started = time.perf_counter()

    def wall() -> float:
        return counters.wall_s + time.perf_counter() - started

    def epoch_now() -> float:
        return counters.global_step / spe

    def add_row() -> None:
        xbar = comm.global_mean(algo.x)
        counters.rows.append(evaluation_row(task, algo.x, xbar, counters, epoch_now(), lr_at(cfg, epoch_now()),
                                            local_workers, wall()))
        progress.evaluated(counters.rows[-1])

    def save() -> None:
        counters.wall_s = wall()
        payload = {"fingerprint": cfg.fingerprint(), "algo": algo.state_dict(), "task": task.state_dict(),
                   "generator": generator.get_state(), "counters": counters.state()}
        save_checkpoint(checkpoint, payload)
        nonlocal started
        started = time.perf_counter()

    progress = Progress(total, counters.global_step, spe, quiet=cfg.quiet)
    caught: list[int] = []
    handlers = {sig: signal.signal(sig, lambda s, _f: caught.append(s)) for sig in (signal.SIGTERM, signal.SIGINT)}
    status = "completed"
    try:
        if not counters.rows:
            add_row()
        while counters.global_step < total:
            epoch, first = divmod(counters.global_step, spe)
            if first == 0:
                task.start_epoch(epoch)
            for batch in itertools.islice(task.batches(epoch), first, None):
                lr = lr_at(cfg, epoch_now())
                tick = time.perf_counter()
                grads, losses = task.gradients(algo.x, batch) if task.has_gradient else (None, None)
                if grads is not None and cfg.grad_clip is not None:
                    clip_rows_(grads, cfg.grad_clip)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                computed = time.perf_counter() - tick
                traffic = algo.step(grads, lr)
                counters.global_step += 1
                counters.time_compute_s += computed if cfg.compute_time == "measured" else float(cfg.compute_time)
                counters.time_comm_s += traffic.comm_time_s
                counters.bits += traffic.wire_bits
                counters.paper_bits += traffic.paper_bits
                loss = float(losses.mean()) if losses is not None else math.nan
                if losses is not None:
                    counters.window_loss_sum += loss
                    counters.window_steps += 1
                progress.step(epoch_now(), loss)
                if losses is not None and not (loss <= cfg.divergence_loss):  # NaN compares False
                    status = "diverged"
                elif counters.global_step % eval_every == 0 or counters.global_step == total:
                    add_row()
                    if not task.has_gradient and not (counters.rows[-1]["train_loss"] <= cfg.divergence_loss):
                        status = "diverged"
                if status == "diverged":
                    if counters.rows[-1]["step"] != counters.global_step:
                        add_row()
                    break
                if counters.global_step % ckpt_every == 0 or counters.global_step == total:
                    save()
                if caught:
                    save()
                    raise Interrupted(caught[0])
                if counters.global_step >= total:
                    break
            if status == "diverged":
                break
    except Interrupted as stop:
        progress.close()
        write_metrics(out / "metrics.parquet", counters.rows)
        write_json(out / "run.json", {**record, "status": "interrupted", "interrupted_at_step": counters.global_step})
        print(f"{out}: interrupted at step {counters.global_step}; the same command resumes it", file=sys.stderr)
        return 128 + stop.signum
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    progress.close()
    write_metrics(out / "metrics.parquet", counters.rows)
    last = counters.rows[-1]
    accs = [r["test_acc"] for r in counters.rows if not math.isnan(r["test_acc"])]
    final = {k: last[k] for k in last}
    final["best_test_acc"] = max(accs) if accs else math.nan
    write_json(out / "run.json", {**record, "status": status, "end_time": now(), "final": final})
    checkpoint.unlink(missing_ok=True)
    if not cfg.quiet:
        print(f"{out}: {status} at step {counters.global_step} (epoch {epoch_now():.2f}); "
              f"test_acc={last['test_acc']:.4f}, consensus_distance={last['consensus_distance']:.3g}",
              file=sys.stderr)
    return 0
