"""The one local step every algorithm shares: weight decay, heavy-ball or Nesterov momentum.

As in the authors' code: ``d = g + wd·x``; ``m ← μ m + d``; then ``d ← d + μ m`` (Nesterov)
or ``d ← m``. Weight decay can be masked (the code applies none to BatchNorm parameters).

A method that only steps along the direction (``x −= η d``) calls ``descend``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import BenchError


@dataclass(frozen=True)
class LocalStepConfig:
    momentum: float = 0.0  # μ, heavy-ball coefficient; 0 disables the buffer
    nesterov: bool = False  # Nesterov look-ahead on top of the momentum buffer
    weight_decay: float = 0.0  # L2 coefficient added to the gradient

    def __post_init__(self) -> None:
        if not 0.0 <= self.momentum < 1.0:
            raise BenchError(f"momentum={self.momentum} must be in [0, 1)")
        if self.weight_decay < 0:
            raise BenchError(f"weight_decay={self.weight_decay} must be >= 0")
        if self.nesterov and self.momentum == 0.0:
            raise BenchError("nesterov=true needs momentum > 0")


class LocalStep:
    """Turns per-worker gradients ``g [w, d]`` into the direction the SGD step uses."""

    def __init__(self, config: LocalStepConfig | None = None, decay_mask: torch.Tensor | None = None):
        self.config = config or LocalStepConfig()
        # [d] of 0/1: where weight decay applies (None: everywhere, also for a mask of all ones: x · 1 is x, the same
        # bits without a pass over the state)
        self.decay_mask = None if decay_mask is not None and bool((decay_mask == 1).all()) else decay_mask
        self.momentum_buffer: torch.Tensor | None = None
        # working buffers, reused every step (a fresh [w, d] tensor a step costs a page-faulting allocation): the
        # direction, which the caller uses before the next call, and the masked decay
        self._d: torch.Tensor | None = None
        self._decay: torch.Tensor | None = None

    @staticmethod
    def _buffer(held: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
        if held is None or held.shape != like.shape or held.dtype != like.dtype or held.device != like.device:
            return torch.empty_like(like, memory_format=torch.contiguous_format)
        return held

    def direction(self, x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """The step's direction from ``grad [w, d]`` at ``x``, in a buffer this object reuses: valid until the next
        call (every method uses it within its step). The same operations, in the same order, as fresh tensors."""
        cfg = self.config
        self._d = d = self._buffer(self._d, grad)
        decay = x
        if cfg.weight_decay and self.decay_mask is not None:
            self._decay = decay = self._buffer(self._decay, x)
            torch.mul(x, self.decay_mask, out=decay)
        if cfg.momentum != 0.0 and self.momentum_buffer is None:
            self.momentum_buffer = torch.zeros_like(d)
        return _direction_into(cfg, decay, grad, self.momentum_buffer, d)

    def descend(self, x: torch.Tensor, grad: torch.Tensor, lr: float) -> None:
        """``x −= lr · direction(x, grad)`` in place."""
        cfg = self.config
        if cfg.momentum == 0.0 and not cfg.weight_decay and grad.shape == x.shape:
            x.sub_(grad, alpha=lr)  # the direction is a copy of g: the same step without the copy
            return
        x.sub_(self.direction(x, grad), alpha=lr)

    def state_dict(self) -> dict:
        return {"momentum_buffer": self.momentum_buffer}

    def load_state_dict(self, state: dict) -> None:
        self.momentum_buffer = state["momentum_buffer"]


def _direction_into(cfg: LocalStepConfig, decay: torch.Tensor, grad: torch.Tensor, m: torch.Tensor | None,
                    d: torch.Tensor) -> torch.Tensor:
    """The eager local step: ``d = g + wd·decay``, then the momentum ``m`` (updated in place) into ``d``."""
    if cfg.weight_decay:
        torch.add(grad, decay, alpha=cfg.weight_decay, out=d)  # add_'s kernel on a copy of grad: one pass
    else:
        d.copy_(grad)
    if cfg.momentum == 0.0:
        return d
    m.mul_(cfg.momentum).add_(d)
    if cfg.nesterov:
        return d.add_(m, alpha=cfg.momentum)
    return d.copy_(m)

