"""EF-SGD (Karimireddy et al. 2019, "Error Feedback Fixes SignSGD"): centralized SGD whose workers send
compressed steps and keep what compression dropped for the next round. With ``sign`` this is EF-signSGD.

Per worker i: ``p_i = η d_i + e_i``; ``Δ_i = Q(p_i)``; ``e_i = p_i − Δ_i``; every worker applies the mean
of the Δ's, ``x ← x − (1/n) Σ_j Δ_j``, so all models stay equal. The Δ's travel as an all-gather of
compressed messages (they cannot be summed on the way as an all-reduce sums). With the identity
compressor e stays 0 and this is all-reduce SGD.
"""
from __future__ import annotations

import torch

from ..comm import Traffic
from .base import Algorithm, register


@register
class ErrorFeedback(Algorithm):
    name, label = "ef", "EF-SGD"
    exact_forms = (({}, "allreduce", {}),)
    centralized = True
    buffers = ("error",)
    error_feedback = ("error", "step")
    decaying_optimum = (("sign", {}, 0.0, 5e-3),)  # EF-signSGD: each sign drops most of a gradient

    def setup(self) -> None:
        self.error = torch.zeros_like(self.x)

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        if d is None:
            return self.comm.drain()
        p = self.error.add_(d, alpha=lr)  # p = η d + e, in e's buffer
        delta = self._compress(p)
        mean = self.comm.allgather_mean(delta)
        self.error.sub_(delta.values)  # e = p − Δ
        self.x.sub_(mean)
        return self.comm.drain()
