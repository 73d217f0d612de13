"""Choco-SGD (Koloskova et al., Algorithm 1), in its efficient form where only ``q`` travels.

State per worker: the model ``x_i``, its public copy ``x̂_i`` (starts at 0) and
``s_i = Σ_j w_ij x̂_j``. ``paper`` order: SGD step, ``q = Q(x − x̂)``, exchange,
``x̂ += q``, ``s += Σ w_ij q_j``, then ``x += γ (s − x̂)``. ``code`` order (the authors'
implementation, so that sending overlaps the next gradient): SGD step, consensus step with the
previous round's ``s, x̂``, then compress and exchange. With ``grad=None`` this is Choco-Gossip.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..comm import Traffic
from ..errors import BenchError
from .base import ALGORITHMS, Algorithm


@dataclass(frozen=True)
class ChocoOptions:
    gamma: float = 1.0  # consensus step size γ in (0, 1]; tune it (bench tune-gamma) for compression
    order: Literal["paper", "code"] = "paper"  # see the module docstring

    def __post_init__(self) -> None:
        if not 0.0 < float(self.gamma) <= 1.0:
            raise BenchError(f"choco gamma={self.gamma} must be in (0, 1]")
        if self.order not in ("paper", "code"):
            raise BenchError(f"choco order={self.order!r}; allowed: paper, code")


@ALGORITHMS.register("choco")
class Choco(Algorithm):
    name = "choco"
    Options = ChocoOptions
    buffers = ("x_hat", "s")

    def setup(self) -> None:
        self.x_hat = torch.zeros_like(self.x)
        self.s = torch.zeros_like(self.x)

    def _exchange(self) -> None:
        q = self._compress(self.x - self.x_hat)
        self.x_hat.add_(q.values)
        self.s.add_(self.comm.gossip(q))

    def _consensus(self) -> None:
        # x += γ (s − x̂): the mean over workers of (s − x̂) is zero because W is doubly stochastic
        self.x.add_(self.s - self.x_hat, alpha=self.options.gamma)

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        if d is not None:
            self.x.sub_(d, alpha=lr)
        if self.options.order == "paper":
            self._exchange()
            self._consensus()
        else:
            self._consensus()
            self._exchange()
        return self.comm.drain()
