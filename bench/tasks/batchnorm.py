"""Whether a model's BatchNorm layers can train on the per-worker batch, found from the model itself before a
run starts: its layers' input shapes are traced on the meta device (shapes only: no memory, no arithmetic)."""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.func import functional_call

from ..errors import BenchError


def batchnorm_inputs(model: nn.Module, input_shape: tuple[int, ...], batch_size: int) -> list[tuple[str, tuple]]:
    """(name, input shape) of every BatchNorm layer the model runs on a batch of ``batch_size`` inputs of
    ``input_shape``, in the order it runs them; empty for a model without BatchNorm (which is not traced)."""
    layers = {m: name for name, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)}
    if not layers:
        return []
    seen: list[tuple[str, tuple]] = []

    def passes(layer: nn.Module):  # BatchNorm keeps its input's shape; torch's meta kernel for it is slow to load
        def forward(x: torch.Tensor) -> torch.Tensor:
            seen.append((layers[layer], tuple(x.shape)))
            return x
        return forward

    state = {name: torch.empty_like(t, device="meta") for name, t in (*model.named_parameters(),
                                                                       *model.named_buffers())}
    try:
        for layer in layers:
            layer.forward = passes(layer)  # an instance attribute, shadowing the class's method until deleted
        with torch.no_grad():
            functional_call(model, state, (torch.empty(batch_size, *input_shape, device="meta"),))
    finally:
        for layer in layers:
            vars(layer).pop("forward", None)
    return seen


def check_batchnorm_batch(task: str, model: nn.Module, input_shape: tuple[int, ...], batch_size: int) -> None:
    """One line (BenchError) when some BatchNorm layer would get one value per channel from a training batch:
    it cannot compute batch statistics from it (torch raises mid-run)."""
    for name, shape in batchnorm_inputs(model, input_shape, batch_size):
        if math.prod(shape) // shape[1] <= 1:
            raise BenchError(f"task {task!r}: batch_size={batch_size} leaves BatchNorm layer {name!r} one value per "
                             f"channel (its input is {list(shape)}), which it cannot train on; use batch_size >= 2")
