"""DGC (Lin et al. 2018, "Deep Gradient Compression"): centralized SGD whose workers send the largest
coordinates of a locally accumulated momentum step, with momentum correction and momentum factor masking.

DGC replaces the shared local step's momentum by its own (the local step's weight decay, masked as there,
stays). Per worker i, with ``g_i = grad_i + wd·x`` and μ the run's momentum:
- momentum correction: ``u_i ← μ u_i + g_i``; ``v_i ← v_i + u_i`` (Nesterov: ``u_i ← μ (u_i + g_i)``;
  ``v_i ← v_i + u_i + g_i``, the paper's appendix);
- ``Δ_i = Q(v_i)`` with a sparse operator (top-k per layer), then ``v_i ← 0`` where Δ_i was sent;
- momentum factor masking (option ``factor_masking``, on by default): ``u_i ← 0`` where Δ_i was sent;
- every worker applies ``x ← x − η · mean_j Δ_j`` (an all-gather of the sparse messages), so models stay equal.

Nothing accumulated is lost, only late: ``x_T = x_0 − η Σ_t mean(s_t) + η mean(v_T)`` for a constant η,
where ``s_t`` is what round t added to v. Sending everything (``top:1.0``) without factor masking is all-reduce
SGD with the run's (heavy-ball or Nesterov) momentum; with factor masking the momentum is reset on every
sent coordinate, so it is all-reduce SGD without momentum. Not reproduced: the warm-up of the sparsity
schedule and local gradient clipping.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..comm import Traffic
from ..errors import BenchError
from .base import Algorithm, register
from .knobs import KnobOptions, flag, knob
from .local import LocalStep, LocalStepConfig


@dataclass(frozen=True)
class DGCOptions(KnobOptions):
    # zero the momentum u where v was sent (the paper's momentum factor masking)
    factor_masking: bool = knob(True, flag)


@register
class DGC(Algorithm):
    name, label = "dgc", "DGC"
    Options = DGCOptions
    centralized = True

    @classmethod
    def check_compressor(cls, compressor) -> None:
        # the accumulation v is zeroed where sent: the operator must send coordinates of v as they are
        if not compressor.sparse or compressor.unbiased:
            raise BenchError(f"algorithm 'dgc' sends the largest coordinates of its accumulated step; use a "
                             f"biased sparsifier such as top:0.01 or rand:0.01 (got {compressor.spec!r})")
    examples = ({}, {"factor_masking": False})
    exact_forms = (({"factor_masking": False}, "allreduce", {}),)  # momentum correction: the run's momentum
    buffers = ("u", "v")
    error_feedback = ("v", "gradient")  # what is not sent yet (its momentum correction: with momentum, more)
    # without factor masking (with it, a coordinate sent often has its momentum reset often, and it stalls near)
    decaying_optimum = (("top:0.1", {"factor_masking": False}, 0.5, 2e-2),)

    def setup(self) -> None:
        self.u = torch.zeros_like(self.x)  # momentum (corrected: kept before sparsification)
        self.v = torch.zeros_like(self.x)  # accumulated, not yet sent
        cfg = self.local.config
        # the shared local step's weight decay (and its mask) without its momentum, which DGC replaces
        self._decay = LocalStep(LocalStepConfig(weight_decay=cfg.weight_decay), decay_mask=self.local.decay_mask)

    def step(self, grad, lr: float) -> Traffic:
        if grad is None:
            return self.comm.drain()
        cfg = self.local.config
        g = self._decay.direction(self.x, grad)
        if cfg.nesterov:
            self.u.add_(g).mul_(cfg.momentum)
            self.v.add_(self.u).add_(g)
        else:
            self.u.mul_(cfg.momentum).add_(g)
            self.v.add_(self.u)
        delta = self._compress(self.v)
        mean = self.comm.allgather_mean(delta)
        sent = self.compressor.support(delta)
        self.v.masked_fill_(sent, 0.0)  # v − Δ: a biased sparsifier sends v itself where it sends
        if self.options.factor_masking:
            self.u.masked_fill_(sent, 0.0)
        self.x.sub_(mean, alpha=lr)
        return self.comm.drain()
