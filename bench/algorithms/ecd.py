"""ECD-PSGD (Tang et al. 2018), extrapolation compression, as the authors implemented it.

Workers keep estimates ``y_j`` of their neighbours' models; only ``s_i = Σ_j w_ij y_j`` is
needed. With t counting from 1: ``x^{t+1} = s − η d``, ``z = (1 − t/2) x^t + (t/2) x^{t+1}``,
``q = Q(z)`` is sent, and every holder sets ``y ← (1 − 2/t) y + (2/t) q`` (so
``s ← (1 − 2/t) s + (2/t) Σ_j w_ij q_j``). The estimates start from the initial models,
exchanged exactly once (counted in step 1).

With a sparsifier (``top``, ``rand``) only the transmitted coordinates of an estimate move, as in
the authors' code: ``y_j[idx] ← (1 − 2/t) y_j[idx] + (2/t) q_j[idx]``, the others stay (scaling
them too would flip their sign at t = 1 and zero them at t = 2). Every holder of ``y_j`` applies
the same update, so worker j knows it too: j keeps ``y_j`` and sends, on the positions it chose,
the change ``m_j = (2/t)(q_j − y_j)`` instead of ``q_j`` (the same positions and bits); holders add
``Σ_j w_ij m_j`` to ``s``.
"""
from __future__ import annotations

from ..comm import Traffic
from ..compressors import make_compressor
from .base import ALGORITHMS, Algorithm


@ALGORITHMS.register("ecd")
class ECD(Algorithm):
    name = "ecd"
    label = "ECD-PSGD"
    fixed_graph = True  # running sums of (W − I)·copies
    buffers = ("s", "t", "y")

    def setup(self) -> None:
        self.s = self.comm.gossip(make_compressor("none").compress(self.x))
        self.t = 1
        # the estimate every neighbour holds of each local worker (only sparsifiers need it)
        self.y = self.x.clone() if self.compressor.sparse else None

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        t = float(self.t)
        x_next = self.s.clone() if d is None else self.s - lr * d
        z = self.x.mul(1.0 - t / 2.0).add_(x_next, alpha=t / 2.0)
        q = self._compress(z)
        self.x = x_next
        if self.y is None:
            self.s.mul_(1.0 - 2.0 / t).add_(self.comm.gossip(q), alpha=2.0 / t)
        else:
            change = self.compressor.on_support(q, (q.values - self.y).mul_(2.0 / t))
            self.y.add_(change.values)
            self.s.add_(self.comm.gossip(change))
        self.t += 1
        return self.comm.drain()
