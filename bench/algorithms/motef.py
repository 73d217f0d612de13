"""MoTEF (Islamov, Gao, Stich 2024, "Towards Faster Decentralized Stochastic Optimization with Communication
Compression", Algorithm 1): gradient tracking of a momentum estimate, over compressed messages with EF21-style
error feedback (public copies refreshed by compressed differences).

Per worker i: the model ``x_i`` and its public copy ``h_i``, the momentum ``m_i``, the tracker ``v_i`` and its
public copy ``g_i``. Algorithm 1, with γ the consensus step, η the learning rate and λ the momentum weight::

    x^{t+1} = x^t + γ (W − I) h^t − η v^t                 h^{t+1} = h^t + Q(x^{t+1} − h^t)
    m^{t+1} = (1 − λ) m^t + λ ∇f(x^{t+1}; ξ^{t+1})
    v^{t+1} = v^t + γ (W − I) g^t + m^{t+1} − m^t         g^{t+1} = g^t + Q(v^{t+1} − g^t)

with ``v^0 = m^0 = ∇f(x^0; ξ^0)`` (the first estimate is the first gradient) and the public copies from 0, as the
suite's BEER and Choco start theirs. Only the Q's travel, two messages a round.

This is BEER's recursion (bench/algorithms/beer.py, Zhao et al. 2022, Algorithm 1) with the momentum m where
BEER has the gradient, so the module is BEER with its direction taken from m: the step receives the stochastic
gradient at x^t, updates m, and hands m to the shared local step (bench/algorithms/local.py), whose output d_t
BEER tracks: ``d_t = m_t`` with the run's momentum 0 and no weight decay (the paper's setting: ``--set
momentum=0``); weight decay adds ``wd·x^t`` to m (outside the average), and a run's heavy-ball momentum acts on
top of it. BEER's bookkeeping, its reordering of Algorithm 1 to one gradient a step, its copies per link on a
time-varying graph and its acknowledgement rule for lost or late messages apply unchanged: nothing of them
depends on what the direction is.

Special cases and the average: λ = 1 is BEER, message for message. With the identity compressor and γ = 1, after
a first local step, it is gradient tracking of the momentum, ``x ← W x − η v``, ``v ← W v + d_new − d_old``. For
any compressor ``mean(v^t) = mean(d_t)`` and ``mean(x^{t+1}) = mean(x^t) − η mean(d_t)``, and with exact
gradients on heterogeneous data the fixed point is the optimum of the mean objective (m = ∇f there, and the
tracker carries the mean gradient, which vanishes only at that optimum).

γ is the ``gamma`` knob (``auto``: tuned on this method's own gossip, its step with no gradient, which is BEER's).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import register
from .knobs import fraction, knob
from .momentum_tracking import MomentumTracking
from .step_tuning import ConsensusStepOptions


@dataclass(frozen=True)
class MoTEFOptions(ConsensusStepOptions):
    """γ: the consensus step of both gossips; λ (``lam``): the momentum weight."""

    # m ← (1 − λ) m + λ g: the weight of a new gradient (1: the plain gradient, BEER); 0.01, the top of the
    # authors' reported runs (0.001-0.01; 0.1 before 2026-12-07)
    lam: float = knob(0.01, fraction, tune=True, low=0.0, high=1.0)


@register
class MoTEF(MomentumTracking):
    """BEER's flags (contraction compressors, γ, copies per link, the "ack" rules, the average), tracking a
    momentum estimate."""

    name, label = "motef", "MoTEF"
    Options = MoTEFOptions
    auto_revision = 0  # a new method: no runs found γ otherwise
    revision = 1  # λ's default from 0.1 to the authors' 0.01 (2026-12-07): runs at the default moved
    examples = ({"gamma": 0.5, "lam": 0.3}, {"gamma": 1.0, "lam": 1.0})
    exact_forms = (({"gamma": 1.0, "lam": 1.0}, "gradient-tracking", {}),)
    same_run_as = (({"gamma": 0.4, "lam": 1.0}, "beer", {"gamma": 0.4}),)
    exact_optimum = tuple((c, {"gamma": g, "lam": 0.3}) for c, g in (("none", 1.0), ("top:0.3", 0.6), ("sign", 0.6),
                                                                  ("qsgd:2", 0.6), ("rand:0.5", 0.5)))

    def new_gradient_weight(self) -> float:
        return float(self.options.lam)
