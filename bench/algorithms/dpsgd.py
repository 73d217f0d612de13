"""D-PSGD (Lian et al. 2017): exact gossip of the models, no compression.

``paper`` order gossips the old iterates then steps, ``x ← W x − η d``; ``code`` order (the
authors' implementation) steps then gossips, ``x ← W (x − η d)``.
"""
from __future__ import annotations

from ..catalog import algorithms as catalog
from ..comm import Traffic
from ..compressors import make_compressor
from .base import ALGORITHMS, Algorithm


@ALGORITHMS.register("dpsgd")
class DPSGD(catalog.DPSGD, Algorithm):
    def setup(self) -> None:
        self._exact = make_compressor("none")

    def _mix(self, v):
        return self.comm.gossip(self._exact.compress(v))

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        if self.options.order == "paper":
            mixed = self._mix(self.x)
            self.x = mixed if d is None else mixed.sub_(d, alpha=lr)
        else:
            if d is not None:
                self.x.sub_(d, alpha=lr)
            self.x = self._mix(self.x)
        return self.comm.drain()
