"""Gradients of all n workers at once: vectorised with torch.func, or a loop over workers.

The vectorised path maps a functional model call over the stacked parameters and batches (one
forward for all workers) and differentiates the sum of the n losses once with autograd: worker i's
loss depends on row i alone, so the gradient of the sum in row i is worker i's gradient (the sum's
backward multiplies by exactly 1). This is torch.func's ``vmap(grad(...))`` without its transform:
the same batched kernels, and no import of ``torch._dynamo``, which ``torch.func.grad``'s first call
makes (0.7-1 s a process; tests/test_startup_probe.py). Per-worker state travels as stacked tensors: BatchNorm running
statistics are passed batched into the call and come back updated (the module's own buffers are
never touched), recurrent hidden states are inputs and outputs of the task's loss. The loop loads
each worker's row into the module in turn; it is the reference the vectorised path is tested
against, and the fallback (``task_options.vectorize=false``, or where the vectorised path fails).
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from torch.func import functional_call, vmap

from ..errors import BenchError
from .flat import FlatModel

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits [B, C]`` against class indices ``target [B]``: F.cross_entropy's value
    (to float round-off), written as log-softmax and a gather. Under vmap, F.cross_entropy's nll_loss has
    no batching rule and falls back to a decomposition whose shape checks import torch's symbolic-shape
    machinery and sympy (0.3 s a process); these two operations batch natively."""
    return -logits.log_softmax(-1).gather(-1, target.unsqueeze(-1)).mean()


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

    rows = x.detach().requires_grad_(True)
    params = per_parameter(flat, rows)

    def one_worker(worker_params, worker_state, xb, yb):
        tensors = {name: torch.zeros(shape, dtype=dtype, device=xb.device) for name, shape, dtype in int_buffers}
        tensors.update(worker_params)
        tensors.update(worker_state)
        loss = loss_fn(functional_call(model, tensors, (xb,)), yb)
        if penalty is not None:
            loss = loss + penalty(torch.cat([worker_params[name].reshape(-1) for name in flat.names]))
        return loss

    model.train()
    losses = vmap(one_worker)(params, state, inputs, targets)
    grads = _row_gradients(losses, rows)
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
    rows = x.detach().requires_grad_(True)
    losses, aux = vmap(worker_loss)(per_parameter(flat, rows), *worker_args)
    grads = _row_gradients(losses, rows)
    return grads, losses.detach(), _detached(aux)


def _row_gradients(losses: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Row i of the gradient of ``sum(losses)`` with respect to ``rows [n, d]``: worker i's gradient,
    since loss i reads row i only; zeros where a parameter does not reach the loss."""
    if not losses.requires_grad:
        return torch.zeros_like(rows)
    (grads,) = torch.autograd.grad(losses.sum(), rows, allow_unused=True, materialize_grads=True)
    return grads


def _detached(aux: Any) -> Any:
    """``aux`` with every tensor cut from the graph (hidden states carried to the next step)."""
    if isinstance(aux, torch.Tensor):
        return aux.detach()
    if isinstance(aux, (tuple, list)):
        return type(aux)(_detached(a) for a in aux)
    if isinstance(aux, dict):
        return {k: _detached(v) for k, v in aux.items()}
    return aux


def loop_gradients(flat: FlatModel, x: torch.Tensor, worker_loss: Callable[[int], torch.Tensor],
                   buffers: torch.Tensor | None = None):
    """``worker_loss(i)`` runs worker i's forward pass on the module (its row already loaded)
    and returns the loss; per-worker buffers (BatchNorm statistics) are swapped in and out. Each gradient is
    taken with ``autograd.grad`` into worker i's row of the result: what ``backward`` would leave in the
    parameters' ``.grad`` after ``zero_grad(set_to_none=True)``, without touching ``.grad`` or the optimizer-facing
    state (a parameter the loss does not reach gets zeros)."""
    n = x.shape[0]
    grads = torch.empty_like(x)
    losses = torch.empty(n, dtype=x.dtype, device=x.device)
    if not flat.model.training:  # train() walks every submodule; the evaluation sets eval() on the whole model
        flat.model.train()
    stacked = buffers is not None and buffers.numel() > 0
    for i in range(n):
        flat.load(x[i])
        if stacked:
            flat.load_buffers(buffers[i])
        loss = worker_loss(i)
        parts = torch.autograd.grad(loss, flat.params, allow_unused=True, materialize_grads=True)
        torch.cat([g.reshape(-1) for g in parts], out=grads[i])
        losses[i] = loss.detach()
        if stacked:
            buffers[i] = flat.get_buffers()
    return grads, losses


@contextmanager
def _state_kept(task) -> Iterator[None]:
    """Gradient calls inside change nothing that training sees: the task's state (BatchNorm statistics,
    hidden states, its path) is put back afterwards and the global generators are forked. Batches,
    augmentation and dropout masks are functions of (seed, epoch, step), so dealing one draws nothing."""
    saved = copy.deepcopy(task.state_dict())
    try:
        with torch.random.fork_rng(devices=[task.device] if task.device.type == "cuda" else []):
            yield
    finally:
        task.load_state_dict(saved)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _untimed_step(task, x: torch.Tensor, batch: Any, path: str | None = None) -> None:
    """One gradient step of ``task`` (on ``path``, else the one it took) whose effects are undone."""
    with _state_kept(task):
        if path is not None:
            task.gradient_path = path
        task.gradients(x.detach().clone(), batch)
        _sync(task.device)


def warm_up(task, x: torch.Tensor, epoch: int = 0) -> None:
    """An untimed gradient step on the task's chosen path, on the first batch of ``epoch``, before
    the first timed one: torch.func's first-call set-up, kernel selection and first allocations are
    paid here, not in the first step's ``time_compute_s``. Changes no result (see ``_state_kept``)."""
    _untimed_step(task, x, next(iter(task.batches(epoch))))


def choose_path(task, x: torch.Tensor) -> tuple[str, dict[str, Any]]:
    """The gradient path of ``task`` and why, from ``task_options.vectorize`` (true | false | auto).
    ``auto`` is a rule that reads no clock and no cache: the vectorised path whenever the task has one, the
    process holds more than one worker (or the path is a closed form) and one trial step of it (untimed,
    undone) runs on this model; the loop where it fails (an
    operation without a batching rule: the same failure on every try). So a rerun and a resume of one
    setting take the same path however busy the machine is."""
    setting = task.options.get("vectorize", "auto")
    if not task.vectorizable:
        if setting is True:
            raise BenchError(f"task {task.name!r} has no vectorised gradient path; "
                             "use task_options.vectorize=false or auto")
        return "loop", {"path": "loop", "reason": f"{task.name} has no vectorised path"}
    if setting is True or setting is False:
        path = "vmap" if setting else "loop"
        return path, {"path": path, "reason": f"task_options.vectorize={str(setting).lower()}"}
    if task.setup.local_workers == 1 and not task.vectorized_for_one:
        # nothing to map over: the mapping's per-call machinery (functional_call, pytrees) would cost about as
        # much again as the model's own pass (docs/performance.md, "h: the peers")
        return "loop", {"path": "loop", "reason": "task_options.vectorize=auto: one worker in this process, "
                                                  "nothing to vectorise"}
    try:
        _untimed_step(task, x, next(iter(task.batches(0))), "vmap")
    except (RuntimeError, NotImplementedError) as err:
        if "out of memory" in str(err):
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return "loop", {"path": "loop", "reason": f"task_options.vectorize=auto: the vectorised path "
                                                  f"fails on this model ({first[:200]})"}
    return "vmap", {"path": "vmap", "reason": "task_options.vectorize=auto: the task's vectorised path, "
                                              "which runs on this model (chosen by rule, not by timing)"}
