"""CEDAS (Huang & Pu, IEEE TAC 2023, "CEDAS: A Compressed Decentralized Stochastic Gradient Method with Improved
Convergence", arXiv:2301.05872, Algorithm 1): compressed exact diffusion with adaptive stepsizes. Exact
diffusion's adapt-correct-combine round, whose combine step mixes public copies refreshed by one compressed
difference a round (the compressed exchange LEAD's COMM procedure makes).

Per worker: the model ``x_i``, the last local step ``ψ_i`` (ψ⁰ = x⁰, so the first round mixes φ¹ = ψ¹ as exact
diffusion starts), the public copy ``h_i`` (from 0) and ``u = h_w − h = (W − I) h``; γ ``mix_step``, α
``copy_step``, α_k the step size of round k (below)::

    ψ^{k+1} = x^k − α_k d_k                                          (adapt)
    φ^{k+1} = ψ^{k+1} + x^k − ψ^k                                    (correct)
    q = Q(φ − h);   φ̂ = h + q;   φ̂_w = h_w + W q                      (one message, q)
    x^{k+1} = φ^{k+1} − (γ/2)(φ̂ − φ̂_w)                               (combine)
    h ← (1 − α) h + α φ̂ = h + α q;   h_w ← h_w + α W q

with ``d_k`` the shared local step's direction at x^k. One gossip gives ``z = (W − I) q``; φ̂_w − φ̂ = u + z and
u ← u + α z, as Choco keeps its u.

Special case: with the identity φ̂ = φ and φ̂_w = W φ whatever α is, and with γ = 1 x^{k+1} = W̄ φ^{k+1},
W̄ = (I + W)/2: exact diffusion with adaptive stepsizes (EDAS, Huang & Pu 2022; exact diffusion, Yuan et al. 2019,
for a constant step), x^{k+1} = W̄ (2x^k − x^{k−1} − α_k d_k + α_{k−1} d_{k−1}) from x¹ = W̄ (x⁰ − α₀ d₀)
(tests/test_cedas.py checks it step by step). For a constant step φ is LEAD's Y and the rounds are LEAD's, from
LEAD's second iterate on (LEAD's first step is local; tests/test_cedas.py checks that too, compressed).

The step size (option ``stepsize``): ``constant`` (the default), α_k = the run's lr (under the run's own lr
schedule); ``decaying``, the paper's rule for strongly convex objectives α_k = θ/(μ(k + m)), written
α_k = lr·m/(k + m) with m = ``decay_shift`` so that α₀ = lr (θ/μ = lr·m: no μ needs to be known). Constant is the
default because the paper's rule needs a strong convexity constant the suite's (mostly nonconvex) tasks do not
have, the schedule of a run's lr belongs to the runner, and with exact gradients a constant step keeps exact
diffusion's fixed point at the optimum of the mean objective (linear convergence), where D-PSGD keeps a bias.

The average: mean(φ̂ − φ̂_w) = −mean(u + z) = 0 for a doubly stochastic W, so mean(x − ψ) stays 0 and
mean(x^{k+1}) = mean(x^k) − α_k mean(d_k) for every compressor: SGD on the average direction with the run's lr
under ``constant``, with the decayed α_k under ``decaying``.

Compressors: the paper's analysis takes unbiased ones (E Q(x) = x, E‖Q(x) − x‖² ≤ C‖x‖²), so QSGD takes its
unbiased form; a biased operator runs, without that guarantee. ``grad=None`` runs the round with d = 0.
W h is kept up to date round by round, which holds for a fixed graph only (a time-varying one is refused), and
there is no rule for lost messages yet (a lossy network is refused), both by what its class declares
(``fixed_graph``, no ``fault_rule``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..comm import Traffic
from ..errors import BenchError
from .base import Algorithm, register
from .knobs import KnobOptions, fraction, knob, read_rounds


def schedule(where: str, value: Any) -> str:
    if value not in ("constant", "decaying"):
        raise BenchError(f"{where}={value!r}; allowed: constant, decaying")
    return value


@dataclass(frozen=True)
class CEDASOptions(KnobOptions):
    """The steps of CEDAS's compressed exchange and its step-size rule. No ``auto``: its gossip alone is exact
    diffusion's, not a consensus problem a γ is tuned on."""

    # γ: x = φ − (γ/2)(φ̂ − φ̂_w); 1 is exact diffusion's W̄ = (I + W)/2 (γ ≤ 1 keeps I − γ(I − W)/2 ⪰ 0)
    mix_step: float = knob(1.0, fraction, tune=True, low=0.0, high=1.0)
    # α: the copies' step, h += α q; it shrinks as Q's variance C grows (about 1/(1 + C)): 0.1 suits 10× compression
    copy_step: float = knob(0.1, fraction, tune=True, low=0.0, high=1.0)
    # α_k: the run's lr (constant) or the paper's decaying rule lr·m/(k + m) (decaying, m = decay_shift)
    stepsize: str = knob("constant", schedule)
    decay_shift: int = knob(100, read_rounds)


@register
class CEDAS(Algorithm):
    name, label = "cedas", "CEDAS"
    Options = CEDASOptions
    # mean(x) moves by −α_k mean(d) whatever is sent (α_k = lr unless stepsize=decaying): (W − I)·copies sums to 0
    keeps_average = True
    # contraction stays False: the paper's analysis takes unbiased operators (QSGD then takes its unbiased form)
    fixed_graph = True  # W·h, the mix of its public copies, is kept up to date round by round
    examples = ({}, {"mix_step": 0.5, "copy_step": 0.5})
    exact_forms = (({"mix_step": 1.0, "copy_step": 0.3}, "exact-diffusion", {}),
                   ({"mix_step": 1.0, "stepsize": "decaying", "decay_shift": 5}, "exact-diffusion", {"decay_shift": 5}))
    # the paper's unbiased operators, γ shrinking with their variance C (rand:0.5 has C = 1)
    exact_optimum = (("none", {}), ("qsgd:4", {}), ("qsgd:2", {"mix_step": 0.5}),
                     ("rand:0.5,unbiased=true", {"mix_step": 0.5}))
    buffers = ("psi", "h", "u", "t")

    def setup(self) -> None:
        self.psi = self.x.clone()  # ψ^k, the last local step (ψ⁰ = x⁰)
        self.h = torch.zeros_like(self.x)  # the public copy
        self.u = torch.zeros_like(self.x)  # (W − I) h
        self.t = 0  # rounds taken: k
        # reused every round: φ, the compressor's input and output, (W − I) q and φ̂_w − φ̂
        self._phi, self._diff, self._q = (torch.empty_like(self.x) for _ in range(3))
        self._z, self._v = torch.empty_like(self.x), torch.empty_like(self.x)

    def step_size(self, lr: float) -> float:
        """α_k of this round from the run's lr."""
        if self.options.stepsize == "constant":
            return lr
        m = self.options.decay_shift
        return lr * m / (self.t + m)

    def step(self, grad, lr: float) -> Traffic:
        gamma, alpha = self.options.mix_step, self.options.copy_step
        step = self.step_size(lr)
        d = self._direction(grad)
        phi = torch.mul(self.x, 2.0, out=self._phi).sub_(self.psi)  # 2x^k − ψ^k, then − α_k d_k
        self.psi.copy_(self.x)
        if d is not None:
            self.psi.sub_(d, alpha=step)
            phi.sub_(d, alpha=step)
        q = self._compress(torch.sub(phi, self.h, out=self._diff), out=self._q)
        self.h.add_(q.values, alpha=alpha)
        z = self._z.zero_()
        self.comm.gossip_into(q, z, self_shift=-1.0)
        v = torch.add(self.u, z, out=self._v)  # φ̂_w − φ̂ = (W − I) h + (W − I) q
        self.x = torch.add(phi, v, alpha=gamma / 2, out=self.x)
        self.u.add_(z, alpha=alpha)
        self.t += 1
        return self.comm.drain()
