"""Centralized (all-reduce) SGD: every worker applies the exact mean gradient."""
from __future__ import annotations

from ..comm import Traffic
from .base import Algorithm, register


@register
class AllReduce(Algorithm):
    name, label = "allreduce", "all-reduce"
    exact_forms = (({}, "sgd-on-the-mean", {}),)
    reference = True  # the method every gap and target is measured against
    keeps_average = True
    compresses = False
    centralized = True

    def step(self, grad, lr: float) -> Traffic:
        if grad is not None:
            mean_grad = self.comm.allreduce_mean(grad)
            self.local.descend(self.x, mean_grad, lr)
        return self.comm.drain()
