"""Centralized (all-reduce) SGD: every worker applies the exact mean gradient."""
from __future__ import annotations

from ..catalog import algorithms as catalog
from ..comm import Traffic
from .base import ALGORITHMS, Algorithm


@ALGORITHMS.register("allreduce")
class AllReduce(catalog.AllReduce, Algorithm):
    exact_forms = (({}, "sgd-on-the-mean", {}),)
    def step(self, grad, lr: float) -> Traffic:
        if grad is not None:
            mean_grad = self.comm.allreduce_mean(grad)
            self.local.descend(self.x, mean_grad, lr)
        return self.comm.drain()
