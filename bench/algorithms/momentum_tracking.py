"""The shared part of MoTEF and DoCoM (bench/algorithms/motef.py, docom.py): BEER tracking a momentum estimate
``m ← (1 − w) m + w g`` of the local gradient instead of the gradient itself, each method saying what its
weight ``w`` of a new gradient is (MoTEF's λ, DoCoM's β). Not a method: no registration here."""
from __future__ import annotations

import torch

from .beer import BEER


class MomentumTracking(BEER):
    buffers = BEER.buffers + ("m",)

    def setup(self) -> None:
        super().setup()
        self.m = torch.zeros_like(self.x)  # the momentum estimate of the gradient

    def _direction(self, grad):
        if grad is None:  # gossip alone: the momentum waits for the next gradient
            return None
        if self.t == 0:  # m⁰ = ∇f(x⁰): the tracker starts from the first gradient, not from a w-share of it
            self.m.copy_(grad)
        else:  # m ← (1 − w) m + w g, written so that w = 1 gives g exactly (BEER bit for bit)
            weight = self.new_gradient_weight()
            self.m.mul_(1.0 - weight).add_(grad, alpha=weight)
        return self.local.direction(self.x, self.m)

    def new_gradient_weight(self) -> float:
        raise NotImplementedError
