"""DoCoM (Yau & Wai, TMLR 2023, "DoCoM: Compressed Decentralized Optimization with Near-Optimal Sample
Complexity", Algorithm 1): compressed gossip of the model and of a gradient tracker, the tracker fed by a
momentum-assisted local gradient estimate, in the variant this suite's one-gradient step can compute.

Per worker i: the model ``θ_i`` and its public copy ``θ̂_i``, the estimate ``v_i``, the tracker ``g_i`` and its
public copy ``ĝ_i``. Algorithm 1, with γ the consensus step, η the learning rate and β the momentum weight::

    θ^{t+1} = θ^t + γ (W − I) θ̂^t − η g^t               θ̂^{t+1} = θ̂^t + Q(θ^{t+1} − θ̂^t)
    v^{t+1} = β ∇f(θ^{t+1}; ξ^{t+1}) + (1 − β) (v^t + ∇f(θ^{t+1}; ξ^{t+1}) − ∇f(θ^t; ξ^{t+1}))
    g^{t+1} = g^t + γ (W − I) ĝ^t + v^{t+1} − v^t          ĝ^{t+1} = ĝ^t + Q(g^{t+1} − ĝ^t)

with ``g^0 = v^0`` a gradient at θ^0 (the authors' code: a large first batch; here the run's batch) and ``ĝ^0 =
0``; the authors' code starts θ̂^0 at θ^0, this suite at 0 (as its BEER and Choco: no exchange of θ^0 needed).

The variant. v is a STORM-type recursive estimator: its correction ``∇f(θ^{t+1}; ξ^{t+1}) − ∇f(θ^t; ξ^{t+1})``
needs the gradient at the previous iterate on the new sample, a second gradient per step, and the suite's step
receives one (at ``gradient_point()``, on the round's batch). Taking the previous gradient on its own sample
instead does not help: with ``s_t = ∇f(θ^t; ξ^t)`` it reads ``v^{t+1} − s_{t+1} = (1 − β)(v^t − s_t)``, which from
``v^0 = s_0`` leaves v the plain stochastic gradient whatever β. So this module drops the correction and keeps the
momentum form::

    v^{t+1} = (1 − β) v^t + β ∇f(θ^{t+1}; ξ^{t+1})

which is Algorithm 1 exactly for β = 1 (both forms are the plain gradient there; DoCoM is then BEER) and, for
β < 1, a heavy-ball-style average without the variance reduction the paper's rate rests on. With it, the
recursion is MoTEF's (bench/algorithms/motef.py, λ = β: the same updates in other letters), so both are
bench/algorithms/momentum_tracking.py (with β where MoTEF has λ), built as BEER (bench/algorithms/beer.py) tracking the direction the shared local step makes of v
(weight decay added outside the average, where the authors add it to both gradients inside; the run's heavy-ball
momentum on top, which the authors do not use: ``--set momentum=0``). tests/test_docom.py checks both identities
step by step. The module's names are BEER's and MoTEF's: ``m`` is DoCoM's v, ``v`` its tracker g and ``g`` its ĝ,
``h`` its θ̂. As there, the copies are kept per link on a time-varying graph or a lossy network, and
``mean(θ^{t+1}) = mean(θ^t) − η mean(d_t)``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import register
from .knobs import fraction, knob
from .momentum_tracking import MomentumTracking
from .step_tuning import ConsensusStepOptions


@dataclass(frozen=True)
class DoCoMOptions(ConsensusStepOptions):
    """γ: the consensus step of both gossips; β: the momentum weight."""

    # v ← (1 − β) v + β g: the weight of a new gradient (1: the plain gradient); 0.3 as in the authors' scripts
    beta: float = knob(0.3, fraction, low=0.0, high=1.0)


@register
class DoCoM(MomentumTracking):  # m is DoCoM's v, its weight of a new gradient β
    """BEER's flags (contraction compressors, γ, copies per link, the "ack" rules, the average), tracking a
    momentum estimate."""

    name, label = "docom", "DoCoM"
    Options = DoCoMOptions
    auto_revision = 0  # a new method: no runs found γ otherwise
    examples = ({"gamma": 0.5, "beta": 0.3}, {"gamma": 1.0, "beta": 1.0})
    exact_forms = (({"gamma": 1.0, "beta": 1.0}, "gradient-tracking", {}),)
    same_run_as = (({"gamma": 0.4, "beta": 1.0}, "beer", {"gamma": 0.4}),
                   ({"gamma": 0.4, "beta": 0.3}, "motef", {"gamma": 0.4, "lam": 0.3}))  # without STORM's correction
    exact_optimum = tuple((c, {"gamma": g, "beta": 0.5}) for c, g in (("none", 1.0), ("top:0.3", 0.6), ("sign", 0.6),
                                                                   ("qsgd:2", 0.6), ("rand:0.5", 0.5)))

    def new_gradient_weight(self) -> float:
        return float(self.options.beta)
