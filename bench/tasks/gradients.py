"""Gradients of all n workers at once: vectorised with torch.func, or a loop over workers.

The vectorised path maps ``grad`` of a functional model call over the stacked parameters and
batches (one call for all workers). Per-worker state travels as stacked tensors: BatchNorm running
statistics are passed batched into the call and come back updated (the module's own buffers are
never touched), recurrent hidden states are inputs and outputs of the task's loss. The loop loads
each worker's row into the module in turn; it is the reference the vectorised path is tested
against, and the fallback (``task_options.vectorize=false``).
"""
from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch.func import functional_call, grad_and_value, vmap

from ..cache import cache_path, update_json
from ..errors import BenchError
from .flat import FlatModel

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# `vectorize: auto` takes the loop only when it is clearly faster, so that runs on one machine do
# not flip between two paths (equal up to float rounding) on timing noise
LOOP_MARGIN = 0.8
TIMED_STEPS = 3


def _split(flat_rows: torch.Tensor, names: list[str], shapes: list[torch.Size], sizes: list[int]) -> dict:
    """``[n, sum(sizes)]`` → {name: contiguous ``[n, *shape]``} (vmap updates these in place)."""
    out, start = {}, 0
    for name, shape, size in zip(names, shapes, sizes):
        out[name] = flat_rows[:, start:start + size].reshape(flat_rows.shape[0], *shape).clone()
        start += size
    return out


def per_parameter(flat: FlatModel, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """``x [n, d]`` → {name: ``[n, *shape]``} views, the tensors vectorised gradients are taken to."""
    # one tensor per parameter, not slices of a row: the backward of d slices of a row would fill
    # d row-sized zero tensors (quadratic in the model size)
    return {name: piece.view(x.shape[0], *shape) for name, shape, piece in
            zip(flat.names, flat.shapes, x.split(flat.segments, dim=1))}


def vmap_gradients(flat: FlatModel, loss_fn: LossFn, x: torch.Tensor, inputs: torch.Tensor,
                   targets: torch.Tensor, penalty: Callable[[torch.Tensor], torch.Tensor] | None = None,
                   buffers: torch.Tensor | None = None):
    """``x [n, d]``, ``inputs [n, B, ...]``, ``targets [n, B, ...]`` → (grads ``[n, d]``, losses ``[n]``).
    ``buffers [n, nb]`` (BatchNorm running statistics, one row per worker) are updated in place."""
    model = flat.model
    # integer buffers (BatchNorm's num_batches_tracked) are fresh per call: a transformed function
    # may not mutate a tensor it captured, and with a fixed momentum their count is never read
    int_buffers = [(name, b.shape, b.dtype) for name, b in model.named_buffers() if not b.is_floating_point()]
    stacked = buffers is not None and buffers.numel() > 0
    state = _split(buffers, flat.buffer_names, [b.shape for b in flat.buffers], flat.buffer_segments) if stacked else {}

    params = per_parameter(flat, x)

    def one_worker(worker_params, worker_state, xb, yb):
        tensors = {name: torch.zeros(shape, dtype=dtype, device=xb.device) for name, shape, dtype in int_buffers}
        tensors.update(worker_params)
        tensors.update(worker_state)
        loss = loss_fn(functional_call(model, tensors, (xb,)), yb)
        if penalty is not None:
            loss = loss + penalty(torch.cat([worker_params[name].reshape(-1) for name in flat.names]))
        return loss

    model.train()
    grad_dict, losses = vmap(grad_and_value(one_worker))(params, state, inputs, targets)
    grads = torch.cat([grad_dict[name].reshape(x.shape[0], -1) for name in flat.names], dim=1)
    if stacked:
        with torch.no_grad():
            buffers.copy_(torch.cat([state[name].reshape(len(buffers), -1) for name in flat.buffer_names], dim=1))
    return grads, losses.detach()


@torch.no_grad()
def vmap_outputs(flat: FlatModel, x: torch.Tensor, inputs: torch.Tensor, buffers: torch.Tensor | None = None):
    """Outputs ``[n, B, ...]`` of the n models in the rows of ``x [n, d]`` (eval mode, BatchNorm on its
    running statistics ``buffers [n, nb]``) on one batch ``inputs [B, ...]`` shared by all: one call."""
    model = flat.model
    int_buffers = [(name, b.shape, b.dtype) for name, b in model.named_buffers() if not b.is_floating_point()]
    stacked = buffers is not None and buffers.numel() > 0
    state = _split(buffers, flat.buffer_names, [b.shape for b in flat.buffers], flat.buffer_segments) if stacked else {}

    def one_model(worker_params, worker_state, xb):
        tensors = {name: torch.zeros(shape, dtype=dtype, device=xb.device) for name, shape, dtype in int_buffers}
        tensors.update(worker_params)
        tensors.update(worker_state)
        return functional_call(model, tensors, (xb,))

    model.eval()
    return vmap(one_model, in_dims=(0, 0, None))(per_parameter(flat, x), state, inputs)


def vmap_gradients_with_aux(flat: FlatModel, worker_loss: Callable[..., tuple[torch.Tensor, Any]],
                             x: torch.Tensor, *worker_args: Any):
    """``worker_loss(params, *args)`` → (loss, aux) of one worker, ``params`` a dict by parameter name
    (for functional_call), mapped over the rows of ``x [n, d]`` and dimension 0 of every tensor in
    ``worker_args``: (grads ``[n, d]``, losses ``[n]``, aux stacked over workers). For per-worker state
    that is an input and an output of the loss, such as recurrent hidden states."""
    flat.model.train()
    grad_dict, (losses, aux) = vmap(grad_and_value(worker_loss, has_aux=True))(per_parameter(flat, x), *worker_args)
    grads = torch.cat([grad_dict[name].reshape(x.shape[0], -1) for name in flat.names], dim=1)
    return grads, losses.detach(), aux


def loop_gradients(flat: FlatModel, x: torch.Tensor, worker_loss: Callable[[int], torch.Tensor],
                   buffers: torch.Tensor | None = None):
    """``worker_loss(i)`` runs worker i's forward pass on the module (its row already loaded)
    and returns the loss; per-worker buffers (BatchNorm statistics) are swapped in and out."""
    n = x.shape[0]
    grads = torch.empty_like(x)
    losses = torch.empty(n, dtype=x.dtype, device=x.device)
    flat.model.train()
    for i in range(n):
        flat.load(x[i])
        if buffers is not None and buffers.numel():
            flat.load_buffers(buffers[i])
        flat.model.zero_grad(set_to_none=True)
        loss = worker_loss(i)
        loss.backward()
        grads[i] = flat.grad()
        losses[i] = loss.detach()
        if buffers is not None and buffers.numel():
            buffers[i] = flat.get_buffers()
    return grads, losses


def _seconds_per_step(run: Callable[[], Any], device: torch.device) -> float:
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    run()  # warm-up: allocations, kernel selection
    sync()
    times = []
    for _ in range(TIMED_STEPS):
        tick = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - tick)
    return statistics.median(times)


def measure_paths(task, x: torch.Tensor) -> dict[str, float]:
    """Seconds per gradient step of each path on the task's first batch; the task's state (BatchNorm
    statistics, hidden states) is restored afterwards, so measuring changes no result."""
    saved = copy.deepcopy(task.state_dict())
    batch = next(iter(task.batches(0)))
    x = x.detach().clone()
    seconds = {}
    try:
        for path in ("vmap", "loop"):
            task.gradient_path = path
            seconds[path] = _seconds_per_step(lambda: task.gradients(x, batch), task.device)
            task.load_state_dict(copy.deepcopy(saved))
    finally:
        task.load_state_dict(saved)
    return seconds


def _machine(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    # not the thread count: processes of one machine (a launcher and its workers, a test and the runs it
    # starts) may set it differently, and must still take the same path for the same run
    return f"cpu:{platform.machine()}:{os.cpu_count()}cores"


def _decision_key(task, x: torch.Tensor) -> str:
    """What the faster path depends on: the task and its model, the workers held, the batch, the
    machine and the torch build."""
    options = {k: v for k, v in sorted(task.options.items()) if k != "vectorize"}
    return json.dumps([task.name, options, int(x.shape[0]), task.setup.batch_size, str(x.dtype),
                       _machine(task.device), torch.__version__], default=str)


def _read_decisions(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        decisions = json.loads(path.read_text())
        if isinstance(decisions, dict):
            return decisions
    except (OSError, ValueError):
        pass
    raise BenchError(f"gradient path cache {path} is damaged; remove it and the paths are measured again")


def _usable(decision) -> bool:
    return isinstance(decision, dict) and decision.get("path") in ("vmap", "loop")


def choose_path(task, x: torch.Tensor) -> tuple[str, dict[str, Any]]:
    """The gradient path of ``task`` and how it was chosen, from ``task_options.vectorize``
    (true | false | auto). ``auto`` measures once per machine and run shape and remembers the answer
    in the suite's cache, so that two runs of one setting on one machine take the same path (and
    so give the same numbers) however busy the machine was when each started."""
    setting = task.options.get("vectorize", "auto")
    if not task.vectorizable:
        if setting is True:
            raise BenchError(f"task {task.name!r} has no vectorised gradient path; "
                             "use task_options.vectorize=false or auto")
        return "loop", {"path": "loop", "reason": f"{task.name} has no vectorised path"}
    if setting is True or setting is False:
        path = "vmap" if setting else "loop"
        return path, {"path": path, "reason": f"task_options.vectorize={str(setting).lower()}"}
    cache = cache_path("gradient-paths.json")
    key = _decision_key(task, x)
    known = _read_decisions(cache).get(key)
    if _usable(known):
        return known["path"], {**known, "reason": f"measured on {task.device.type} earlier, remembered in {cache}"}
    try:
        seconds = measure_paths(task, x)
    except (RuntimeError, NotImplementedError) as err:  # an operation without a batching rule
        if "out of memory" in str(err):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return "loop", {"path": "loop", "reason": f"the vectorised path failed ({first[:200]})"}
    path = "loop" if seconds["loop"] < LOOP_MARGIN * seconds["vmap"] else "vmap"
    decision = {"path": path, "seconds_per_step": {k: round(v, 6) for k, v in seconds.items()}}
    stored = update_json(cache, key, decision, read=_read_decisions, keep=_usable)
    if stored != decision:  # a parallel run of this setting measured first: take its path, as later runs will
        return stored["path"], {**stored, "reason": f"measured on {task.device.type} by a parallel run, "
                                                    f"remembered in {cache}"}
    return path, {**decision, "reason": f"measured on {task.device.type} (loop taken only below "
                                        f"{LOOP_MARGIN}x the vectorised time)"}
