"""D-PSGD (Lian et al. 2017): exact gossip of the models, no compression.

``paper`` order gossips the old iterates then steps, ``x ← W x − η d``; ``code`` order (the
authors' implementation) steps then gossips, ``x ← W (x − η d)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..comm import Traffic
from ..compressors import make_compressor
from ..errors import BenchError
from .base import ALGORITHMS, Algorithm


@dataclass(frozen=True)
class DPSGDOptions:
    order: Literal["paper", "code"] = "paper"  # gossip-then-step (paper) or step-then-gossip (code)

    def __post_init__(self) -> None:
        if self.order not in ("paper", "code"):
            raise BenchError(f"dpsgd order={self.order!r}; allowed: paper, code")


@ALGORITHMS.register("dpsgd")
class DPSGD(Algorithm):
    name = "dpsgd"
    label = "D-PSGD"
    settings = ("order",)
    Options = DPSGDOptions
    compresses = False

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
