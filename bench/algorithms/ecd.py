"""ECD-PSGD (Tang et al. 2018), extrapolation compression, as the authors implemented it.

Workers keep estimates ``y_j`` of their neighbours' models; only ``s_i = Σ_j w_ij y_j`` is
needed. With t counting from 1: ``x^{t+1} = s − η d``, ``z = (1 − t/2) x^t + (t/2) x^{t+1}``,
``q = Q(z)`` is sent, and every holder sets ``y ← (1 − 2/t) y + (2/t) q`` (so
``s ← (1 − 2/t) s + (2/t) Σ_j w_ij q_j``). The estimates start from the initial models,
exchanged exactly once (counted in step 1).
"""
from __future__ import annotations

from ..comm import Traffic
from ..compressors import make_compressor
from .base import ALGORITHMS, Algorithm


@ALGORITHMS.register("ecd")
class ECD(Algorithm):
    name = "ecd"
    buffers = ("s", "t")

    def setup(self) -> None:
        self.s = self.comm.gossip(make_compressor("none").compress(self.x))
        self.t = 1

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        t = float(self.t)
        x_next = self.s.clone() if d is None else self.s - lr * d
        z = self.x.mul(1.0 - t / 2.0).add_(x_next, alpha=t / 2.0)
        q = self._compress(z)
        self.x = x_next
        self.s.mul_(1.0 - 2.0 / t).add_(self.comm.gossip(q), alpha=2.0 / t)
        self.t += 1
        return self.comm.drain()
