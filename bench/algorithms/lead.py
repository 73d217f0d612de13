"""LEAD (Liu, Li, Wang, Tang, Yan, ICLR 2021, "Linear Convergent Decentralized Optimization with Compression",
Algorithm 1): a primal-dual method (NIDS) whose one message a round is the compressed difference between the
point a worker would send and its public copy.

Per worker: the model ``X_i``, the dual variable ``D_i`` (D¹ = 0, which is in the range of I − W as the paper
asks), the public copy ``H_i`` (H¹ = 0) and ``u = H_w − H = (W − I) H``, where H_w = W H is what the paper's
COMM procedure keeps; η is the run's lr, γ ``dual_step``, α ``copy_step``. Algorithm 1, in the order a step runs::

    k = 0:  X¹ = X⁰ − η d₀                                         (line 2; nothing is sent)
    k ≥ 1:  Y = X − η d_k − η D
            Q = Q(Y − H);   Ŷ = H + Q;   Ŷ_w = H_w + W Q             (COMM: one message, Q)
            D ← D + γ/(2η) (Ŷ − Ŷ_w)
            X ← X − η d_k − η D                                      (= Y − (γ/2)(Ŷ − Ŷ_w))
            H ← (1 − α) H + α Ŷ = H + α Q;   H_w ← (1 − α) H_w + α Ŷ_w = H_w + α W Q

where ``d_k`` is the shared local step's direction at X^k (the gradient plus weight decay, or the momentum
direction). Only Q travels: one gossip gives ``z = (W − I) Q``, so Ŷ_w − Ŷ = u + z and u ← u + α z, as Choco
keeps its u. D is kept in gradient units, as the paper writes it: its fixed point −∇F(x*) does not depend on η,
so a run's lr schedule may change η (which must stay > 0: the dual step is divided by it).

Special case: with the identity Ŷ = Y and Ŷ_w = W Y whatever α is, and with γ = 1 eliminating D gives NIDS
(Li, Shi, Yan 2019; D² of Tang et al. 2018 for a constant step), X^{k+1} = W̄ (2X^k − X^{k−1} − η(d_k − d_{k−1}))
with W̄ = (I + W)/2, from X¹ = X⁰ − η d₀ (tests/test_lead.py checks it step by step).

The average: mean(Ŷ − Ŷ_w) = −mean(u + z) = 0 for a doubly stochastic W, so mean(D) stays 0 and
mean(X^{k+1}) = mean(X^k) − η mean(d_k) for every compressor. With exact gradients on heterogeneous data the fixed
point is consensual at the optimum of the mean objective, where D = −∇F(x*); D-PSGD with the same step keeps a bias.

Compressors: the paper's analysis takes unbiased ones (E Q(x) = x, E‖Q(x) − x‖² ≤ C‖x‖²), so QSGD takes its
unbiased form; a biased operator runs, without that guarantee. ``grad=None`` runs the same round with d = 0.
W H is kept up to date round by round, which holds for a fixed graph only (a time-varying one is refused), and
there is no rule for lost messages yet (a lossy network is refused), both by what its class declares
(``fixed_graph``, no ``fault_rule``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..comm import Traffic
from ..errors import BenchError
from .base import Algorithm, register
from .knobs import KnobOptions, fraction, knob


@dataclass(frozen=True)
class LEADOptions(KnobOptions):
    """γ and α of LEAD's Algorithm 1 (η is the run's lr). No ``auto``: its consensus is driven by the dual step,
    so there is no gossip alone to tune γ on."""

    # γ: D += γ/(2η)(Ŷ − Ŷ_w); 1 with the identity is NIDS (γ ≤ 1 keeps I − γ(I − W)/2 ⪰ 0)
    dual_step: float = knob(1.0, fraction, tune=True, low=0.0, high=1.0)
    # α: the copies' step, H += α Q; it shrinks as Q's variance C grows (about 1/(1 + C)): 0.1 suits 10× compression
    copy_step: float = knob(0.1, fraction, tune=True, low=0.0, high=1.0)


@register
class LEAD(Algorithm):
    name, label = "lead", "LEAD"
    Options = LEADOptions
    # mean(D) stays 0 (its increments are (I − W)·copies), so mean(x) moves by −η mean(d) whatever is sent
    keeps_average = True
    # contraction stays False: the paper's compressors are unbiased, E‖Q(x) − x‖² ≤ C‖x‖² (QSGD's unbiased form)
    fixed_graph = True  # W·H, the mix of its public copies, is kept up to date round by round
    examples = ({}, {"dual_step": 0.5, "copy_step": 0.5})
    exact_forms = (({"dual_step": 1.0, "copy_step": 0.3}, "nids", {}),)
    first_round_messages = 0  # its first step is a local one
    # the unbiased operators of its analysis, γ shrinking with their variance C as its bound on γ does
    exact_optimum = (("none", {}), ("qsgd:4", {}), ("qsgd:2", {"dual_step": 0.5}),
                     ("rand:0.5,unbiased=true", {"dual_step": 0.5}))
    buffers = ("dual", "h", "u", "t")

    def setup(self) -> None:
        self.dual = torch.zeros_like(self.x)  # D
        self.h = torch.zeros_like(self.x)  # H, the public copy
        self.u = torch.zeros_like(self.x)  # (W − I) H
        self.t = 0  # steps taken
        # reused every round: the compressor's input and output, (W − I) Q and Ŷ_w − Ŷ
        self._diff, self._q = torch.empty_like(self.x), torch.empty_like(self.x)
        self._z, self._v = torch.empty_like(self.x), torch.empty_like(self.x)

    def step(self, grad, lr: float) -> Traffic:
        if not lr > 0:
            raise BenchError(f"algorithm 'lead' divides its dual step by the learning rate: lr={lr!r} must be > 0")
        gamma, alpha = self.options.dual_step, self.options.copy_step
        self._descend(grad, lr)  # X − η d_k: X¹ itself at k = 0, the start of Y after
        self.t += 1
        if self.t == 1:
            return self.comm.drain()
        y = self.x.sub_(self.dual, alpha=lr)  # Y, in place: X is Y plus a correction below
        q = self._compress(torch.sub(y, self.h, out=self._diff), out=self._q)
        self.h.add_(q.values, alpha=alpha)
        z = self._z.zero_()
        self.comm.gossip_into(q, z, self_shift=-1.0)
        v = torch.add(self.u, z, out=self._v)  # Ŷ_w − Ŷ = (W − I) H + (W − I) Q
        self.dual.sub_(v, alpha=gamma / (2 * lr))
        self.x.add_(v, alpha=gamma / 2)
        self.u.add_(z, alpha=alpha)
        return self.comm.drain()
