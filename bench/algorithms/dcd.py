"""DCD-PSGD (Tang et al. 2018): gossip, step, then broadcast the compressed *difference*.

Every holder of a replica of ``x_i`` applies the same ``q_i``, so replicas stay exact and
``s_i = Σ_j w_ij x_j`` can be kept up to date from the ``q``'s alone:
``x^{t+½} = s − η d``, ``q = Q(x^{t+½} − x)``, ``x += q``, ``s += Σ_j w_ij q_j``.
The replicas are set up once by an exact exchange of the initial models (counted in step 1).
"""
from __future__ import annotations

from ..comm import Traffic
from ..compressors import make_compressor
from .base import ALGORITHMS, Algorithm


@ALGORITHMS.register("dcd")
class DCD(Algorithm):
    name = "dcd"
    label = "DCD-PSGD"
    fixed_graph = True  # running sums of (W − I)·copies
    buffers = ("s",)

    def setup(self) -> None:
        self.s = self.comm.gossip(make_compressor("none").compress(self.x))

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        target = self.s.clone() if d is None else self.s - lr * d
        q = self._compress(target.sub_(self.x))
        self.x.add_(q.values)
        self.s.add_(self.comm.gossip(q))
        return self.comm.drain()
