"""Gradients of all n workers at once: vectorised with torch.func, or a loop over workers.

The vectorised path maps ``grad`` of a functional model call over the stacked parameters and
batches (one call for all workers). Models with state that vmap cannot carry (BatchNorm running
statistics, recurrent hidden states, dropout streams) use the loop, which loads each worker's row
into the module in turn.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch.func import functional_call, grad_and_value, vmap

from .flat import FlatModel

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def vmap_gradients(flat: FlatModel, loss_fn: LossFn, x: torch.Tensor, inputs: torch.Tensor,
                   targets: torch.Tensor, penalty: Callable[[torch.Tensor], torch.Tensor] | None = None):
    """``x [n, d]``, ``inputs [n, B, ...]``, ``targets [n, B, ...]`` → (grads ``[n, d]``, losses ``[n]``)."""
    model = flat.model

    def one_worker(row, xb, yb):
        loss = loss_fn(functional_call(model, flat.views(row), (xb,)), yb)
        return loss + penalty(row) if penalty is not None else loss

    model.train()
    grads, losses = vmap(grad_and_value(one_worker))(x, inputs, targets)
    return grads, losses.detach()


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
