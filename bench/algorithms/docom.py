"""DoCoM (Yau & Wai, TMLR 2023, "DoCoM: Compressed Decentralized Optimization with Near-Optimal Sample
Complexity", Algorithm 1): compressed gossip of the model and of a gradient tracker, the tracker fed by a STORM
estimate of the local gradient, as the authors' code computes it (OscarYau525/docom,
``pcode/optim/parallel_docom_v.py``).

Per worker i: the model ``θ_i`` and its public copy ``θ̂_i``, the estimate ``v_i``, the tracker ``g_i`` and its
public copy ``ĝ_i``. Algorithm 1, with γ the consensus step, η the learning rate and β the momentum weight::

    θ^{t+1} = θ^t + γ (W − I) θ̂^t − η g^t               θ̂^{t+1} = θ̂^t + Q(θ^{t+1} − θ̂^t)
    v^{t+1} = β ∇f(θ^{t+1}; ξ^{t+1}) + (1 − β) (v^t + ∇f(θ^{t+1}; ξ^{t+1}) − ∇f(θ^t; ξ^{t+1}))
    g^{t+1} = g^t + γ (W − I) ĝ^t + v^{t+1} − v^t          ĝ^{t+1} = ĝ^t + Q(g^{t+1} − ĝ^t)

with ``g^0 = v^0`` a gradient at θ^0 and ``ĝ^0 = 0``. Two gradients a step, both on the round's batch ξ^{t+1}: at
the model and at the previous model (``second_gradient_point``: the runner computes both, and counts both in
the step's compute time). The authors start v^0 from a large batch (``first_batches``: the mean gradient of the
epoch's first batches, 1 by default) and divide β by ``beta_decay`` at the epochs ``beta_epochs`` (their FEMNIST
script: β = 0.3, ÷10 at epochs 50, 200 and 400; none by default). This suite's own choices: θ̂^0 = 0 (the
authors start it at θ^0; as BEER and Choco here, no exchange of θ^0 needed), weight decay added to the direction
outside the estimate (the authors add it to both gradients), and the run's heavy-ball momentum on top unless
``momentum=0`` (the authors use none).

Without a second gradient (a caller of ``step`` alone, e.g. a test on a full-batch problem) the correction takes
the previous step's gradient: with deterministic gradients ∇f(θ^t; ξ^{t+1}) = ∇f(θ^t), the same iterates. With
β = 1 the estimate is the plain gradient and DoCoM is BEER. Built on bench/algorithms/momentum_tracking.py (BEER
tracking an estimate; its names: ``m`` is DoCoM's v, ``v`` its tracker g, ``g`` its ĝ, ``h`` its θ̂), so the
copies are kept per link on a time-varying graph or a lossy network as BEER's, and
``mean(θ^{t+1}) = mean(θ^t) − η mean(d_t)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import register
from .knobs import above_one, epochs_list, fraction, knob, read_rounds
from .momentum_tracking import MomentumTracking
from .step_tuning import ConsensusStepOptions


@dataclass(frozen=True)
class DoCoMOptions(ConsensusStepOptions):
    """γ: the consensus step of both gossips; β: the momentum weight, its schedule and v⁰'s batches."""

    # the weight of the new gradient in v's STORM recursion (1: the plain gradient); 0.3 as the authors' FEMNIST runs
    beta: float = knob(0.3, fraction, tune=True, low=0.0, high=1.0)
    beta_epochs: tuple = knob((), epochs_list)  # epochs at which β is divided by beta_decay (the authors: 50, 200, 400)
    beta_decay: float = knob(10.0, above_one)
    first_batches: int = knob(1, read_rounds)  # v⁰: the mean gradient at θ⁰ of the epoch's first batches


@register
class DoCoM(MomentumTracking):  # m is DoCoM's v, β its weight of a new gradient
    """BEER's flags (contraction compressors, γ, copies per link, the "ack" rules, the average), tracking a STORM
    estimate from two gradients a step."""

    name, label = "docom", "DoCoM"
    Options = DoCoMOptions
    auto_revision = 0  # a new method: no runs found γ otherwise
    revision = 1  # the STORM estimator (2026-12-07); before, a momentum average (MoTEF's update)
    buffers = MomentumTracking.buffers + ("x_prev", "last_grad")
    examples = ({"gamma": 0.5, "beta": 0.3}, {"gamma": 1.0, "beta": 1.0},
                {"gamma": 0.5, "beta": 0.3, "beta_epochs": [0.5], "first_batches": 3})
    exact_forms = (({"gamma": 1.0, "beta": 1.0}, "gradient-tracking", {}),)
    same_run_as = (({"gamma": 0.4, "beta": 1.0}, "beer", {"gamma": 0.4}),)
    exact_optimum = tuple((c, {"gamma": g, "beta": 0.5}) for c, g in (("none", 1.0), ("top:0.3", 0.6), ("sign", 0.6),
                                                                   ("qsgd:2", 0.6), ("rand:0.5", 0.5)))

    def setup(self) -> None:
        super().setup()
        self.x_prev = torch.zeros_like(self.x)  # θ^t: where the last gradient was taken
        self.last_grad = torch.zeros_like(self.x)  # ∇f(θ^t; ξ^t), the correction's stand-in without a second gradient
        self.second = None  # ∇f(θ^t; ξ^{t+1}), given by the runner for this step

    # -- the runner's second gradient ----------------------------------------------------------------------
    def second_gradient_point(self) -> torch.Tensor | None:
        return self.x_prev if self.t > 0 else None

    def take_second_gradient(self, grad: torch.Tensor) -> None:
        self.second = grad

    def initial_batches(self) -> int:
        return int(self.options.first_batches)

    # -- the estimate --------------------------------------------------------------------------------------
    def beta_at(self, epoch: float) -> float:
        """β after the schedule's divisions up to ``epoch``."""
        passed = sum(epoch >= e for e in self.options.beta_epochs)
        return float(self.options.beta) / float(self.options.beta_decay) ** passed

    def _direction(self, grad):
        if grad is None:  # gossip alone: the estimate waits for the next gradient
            return None
        if self.t == 0:  # v⁰ = ∇f(θ⁰) (the runner's mean over first_batches batches)
            self.m.copy_(grad)
        else:  # v ← g + (1 − β)(v − g_prev): β g + (1 − β)(v + g − g_prev)
            previous = self.second if self.second is not None else self.last_grad
            self.m.sub_(previous).mul_(1.0 - self.beta_at(self.epoch)).add_(grad)
        self.second = None
        self.last_grad.copy_(grad)
        self.x_prev.copy_(self.x)  # θ^{t+1} of this gradient is θ^t of the next
        return self.local.direction(self.x, self.m)
