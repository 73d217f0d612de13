"""The one local step every algorithm shares: weight decay, heavy-ball or Nesterov momentum.

As in the authors' code: ``d = g + wd·x``; ``m ← μ m + d``; then ``d ← d + μ m`` (Nesterov)
or ``d ← m``. Weight decay can be masked (the code applies none to BatchNorm parameters).

A method that only steps along the direction (``x −= η d``) calls ``descend``: on a CPU it is torch's fused SGD
kernel (``torch._fused_sgd_``), one pass over x, g and m where the separate operations take five, and the same
bits: its vectorised loop does what torch's eager kernels do (one fused multiply-add each for the decay, the
momentum and Nesterov's look-ahead, and for the step), and its scalar loop, which rounds differently, is never
reached (the kernel gets whole cache lines; the last entries take the eager operations). That agreement is
checked once per process and setting on this machine before it is relied on, and tests/test_algorithms.py checks
it on the pinned torch (docs/performance.md, "The local step in one pass").
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import BenchError

# the fused kernel's work comes in cache lines of 64 bytes, and its vector loop covers a whole line of float32 or
# float64 on any of torch's CPU vector widths; a head of this many entries never reaches its scalar loop
FUSED_UNIT = 64
# below this many entries the eager operations cost less than the fused call, which hands every call to the
# thread pool (about 12 µs); torch's own grain for splitting an eager kernel between threads (measured on a
# 2-core CPU with momentum and decay: 15 against 17 µs at 16,384 entries, 47 against 22 µs at 65,536;
# docs/performance.md, "The local step in one pass")
FUSED_MIN = 32768
# (dtype, momentum, nesterov, weight decay) -> whether the fused kernel gave the eager bits on this machine
_FUSED_AGREES: dict[tuple, bool] = {}


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
        """``x −= lr · direction(x, grad)`` in place, the same bits; in one fused pass where ``_fusable`` allows."""
        cfg = self.config
        if cfg.momentum == 0.0 and not cfg.weight_decay and grad.shape == x.shape:
            x.sub_(grad, alpha=lr)  # the direction is a copy of g: the same step without the copy
            return
        if not self._fusable(x, grad, lr):
            x.sub_(self.direction(x, grad), alpha=lr)
            return
        if cfg.momentum != 0.0 and self.momentum_buffer is None:
            self.momentum_buffer = torch.zeros_like(x)
        _fused_descend(cfg, x.view(-1), grad.view(-1),
                       None if cfg.momentum == 0.0 else self.momentum_buffer.view(-1), float(lr))

    def _fusable(self, x: torch.Tensor, grad: torch.Tensor, lr) -> bool:
        cfg, m = self.config, self.momentum_buffer
        return (x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64) and x.numel() >= FUSED_MIN
                and grad.dtype == x.dtype and grad.shape == x.shape and grad.device == x.device
                and x.is_contiguous() and grad.is_contiguous() and not x.requires_grad and not grad.requires_grad
                and grad.data_ptr() != x.data_ptr() and isinstance(lr, (int, float))
                and (self.decay_mask is None or not cfg.weight_decay)
                and (cfg.momentum == 0.0 or m is None or (m.shape == x.shape and m.dtype == x.dtype
                                                         and m.device == x.device and m.is_contiguous()))
                and fused_agrees(x.dtype, cfg))

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


def _fused_descend(cfg: LocalStepConfig, x: torch.Tensor, grad: torch.Tensor, m: torch.Tensor | None,
                   lr: float) -> None:
    """``x −= lr · d`` on flat contiguous x, g, m: the head of whole FUSED_UNITs in torch's fused kernel, the rest
    (fewer than FUSED_UNIT entries) by the eager operations."""
    n = x.numel()
    head = n - n % FUSED_UNIT
    if head:
        torch._fused_sgd_([x[:head]], [grad[:head]], [] if m is None else [m[:head]],
                          weight_decay=cfg.weight_decay, momentum=cfg.momentum, lr=lr, dampening=0.0,
                          nesterov=cfg.nesterov, maximize=False, is_first_step=False)
    if head < n:
        rest = x[head:]
        rest.sub_(_direction_into(cfg, rest, grad[head:], None if m is None else m[head:], torch.empty_like(rest)),
                  alpha=lr)


def fused_agrees(dtype: torch.dtype, cfg: LocalStepConfig) -> bool:
    """Whether, in this process, the fused descent gives the eager operations' bits for ``cfg`` in ``dtype``: checked
    once on 40,037 random entries (past torch's grain for splitting an eager kernel between threads, and not a
    whole number of FUSED_UNITs), over three steps so that the momentum buffer is not zero."""
    key = (dtype, cfg.momentum, cfg.nesterov, cfg.weight_decay)
    if key not in _FUSED_AGREES:
        _FUSED_AGREES[key] = hasattr(torch, "_fused_sgd_") and _check_fused(dtype, cfg)
    return _FUSED_AGREES[key]


def _check_fused(dtype: torch.dtype, cfg: LocalStepConfig) -> bool:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40_037, generator=gen, dtype=dtype)
    x[:3] = torch.tensor([0.0, -0.0, 1e-30], dtype=dtype)
    fused_x, m, fused_m = x.clone(), torch.zeros_like(x), torch.zeros_like(x)
    try:
        for lr in (0.1, 0.05, 0.7):
            g = torch.randn(x.shape, generator=gen, dtype=dtype)
            x.sub_(_direction_into(cfg, x, g, None if cfg.momentum == 0.0 else m, torch.empty_like(x)), alpha=lr)
            _fused_descend(cfg, fused_x, g, None if cfg.momentum == 0.0 else fused_m, lr)
    except (RuntimeError, TypeError):  # a torch without the CPU kernel, or with another signature
        return False
    return bool(torch.equal(x, fused_x) and torch.equal(m, fused_m))
