"""BEER (Zhao, Li, Li, Richtárik, Chi 2022, "BEER: Fast O(1/T) Rate for Decentralized Nonconvex Optimization
with Communication Compression", Algorithm 1): gradient tracking with compressed communication.

Per worker i: the model ``x_i`` and its public copy ``h_i``, the gradient tracker ``v_i`` and its public copy
``g_i`` (the copies start at 0, as in the authors' experiment code and as Choco's ``x̂``). Algorithm 1, with γ
the mixing step and η the learning rate::

    x^{t+1} = x^t + γ (W − I) h^t − η v^t        h^{t+1} = h^t + Q(x^{t+1} − h^t)
    v^{t+1} = v^t + γ (W − I) g^t + ∇f(x^{t+1}) − ∇f(x^t)        g^{t+1} = g^t + Q(v^{t+1} − g^t)

with ``v^0 = ∇f(x^0)``. Only the ``Q``'s travel: every holder of ``h_j`` applies the same ``Q_j``, so the
consensus directions ``u_h = (W − I) h`` and ``u_g = (W − I) g`` are kept up to date from them
(``u += Σ_j w_ij q_j − q_i``), as Choco keeps its ``u``.

One gradient per step. ``step`` receives the gradient at the current model, ``∇f(x^t)``, which closes the
tracker update the previous step could not finish; so a step is the authors' reordering of Algorithm 1
(their torch code's "Reorder"; the iterates are those of Algorithm 1 exactly)::

    t = 0:  v = d_0                                        (g stays 0: nothing sent for it)
    t ≥ 1:  v ← v + γ u_g + d_t − d_{t−1};  q_g = Q(v − g);  g += q_g;  u_g += (W − I) q_g
    then:   x ← x + γ u_h − η v;            q_h = Q(x − h);  h += q_h;  u_h += (W − I) q_h

where ``d_t`` is the shared local step's direction at ``x^t`` (the gradient plus weight decay; with momentum the
tracker follows the momentum direction instead) and ``d_{t−1}`` is kept from the previous step. Traffic: two
compressed messages per step (``q_g``, ``q_h``), one in the first step (``g^0 = 0`` needs none).

Special cases and the average: with the identity compressor and γ = 1, ``h = x`` and ``g = v`` after each
update, and after a first local step ``x^1 = x^0 − η d_0`` (``h^0 = 0``) this is plain gradient tracking,
``x ← W x − η v``, ``v ← W v + d_new − d_old`` with ``v^1 = d_1``. For any compressor ``mean(v^t) = mean(d_t)``
(W is doubly stochastic) and so ``mean(x^{t+1}) = mean(x^t) − η mean(d_t)``: the average follows SGD on the
average direction, and on heterogeneous data the fixed point is the optimum of the mean objective (D-PSGD with a
constant step keeps a bias there). ``grad=None`` runs the model's gossip alone (x ← x + γ u_h; h's update).

γ is Choco's ``gamma`` setting (``gamma=auto``: the γ tuned for Choco-Gossip on the run's graph and compressor).

On a time-varying graph (one-peer-exp) a worker hears a neighbour only in the rounds that use their link, so both
public copies are kept per directed link e = j → i, held alike by j and i (``h_e`` of x_j, ``g_e`` of v_j, from 0),
and refreshed on the round's links as Choco's: ``q_e = Q(x_j − h_e)`` travels on e and ``h_e += q_e`` at both
ends (the same for g with v). The consensus directions are then recomputed over the round's links,
``u_i = Σ_{e = j→i} w_e c_e − Σ_{e = i→k} w_e c_e`` (c = h, g): (W_t − I)·copy where a worker's copies agree,
and zero summed over the workers whatever they are, so the tracker keeps ``mean(v^t) = mean(d_t)`` and the average
still moves as SGD's. As on a static graph a direction is applied in the step after the one that refreshed its
copies, so the iterates are those of Algorithm 1 with W_{t−1} in step t; with the identity and γ = 1 it is
gradient tracking on that sequence. Memory per worker: per union out-link and per union in-link a copy of x and a
copy of v (4 log₂ n copies on one-peer-exp), with u_h and u_g. Bits per round: two messages per active
out-link (one in the first step).

On a network that loses messages (the run's faults) both copies are kept per link too, on any graph, with
Choco's acknowledgement rule (its fault_rule "ack"): a lost q_e is added at neither end, so the two ends of
every link keep the same h_e and g_e, a lost link's stale copy stays in u at both ends, and u_h, u_g still sum
to zero over the workers. So ``mean(v^t) = mean(d_t)`` and ``mean(x^{t+1}) = mean(x^t) − η mean(d_t)`` whatever
is lost, and a schedule that loses nothing gives the static iterates (for a compressor without randomness: a
random one draws per link). Workers away (faults.active, absent) are refused: restoring an away worker's rows
would leave the per-link copies of its links behind (the refusal: a row of tests/test_bad_input.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..comm import Traffic
from .base import Algorithm, register
from .step_tuning import ConsensusStepOptions, TunesItsStep
from .link_copies import LinkCopies


@dataclass(frozen=True)
class BEEROptions(ConsensusStepOptions):
    """γ: the mixing step of both gossips (the paper's γ)."""


@register
class BEER(TunesItsStep, Algorithm):
    name, label = "beer", "BEER"
    Options = BEEROptions
    keeps_average = True
    # the paper's compression operators are contractions (biased, E‖Q(x) − x‖² ≤ (1 − α)‖x‖²)
    contraction = True
    consensus_step = True
    auto_revision = 1
    fault_rule = "ack"  # h and g per link, a lost message added at neither end: mean(v) tracks mean(d)
    late_rule = "ack"  # a late q of h or g added at both ends when it lands
    examples = ({"gamma": 0.5}, {"gamma": 1.0})
    exact_forms = (({"gamma": 1.0}, "gradient-tracking", {}),)
    messages_per_round, first_round_messages = 2, 1  # q of h and of g; g first moves in step 2
    tracker = "v"
    gossip_alone = (("top:0.25", {"gamma": 0.3}, 300, 1e-6),)  # with no gradient, Choco-Gossip on x
    exact_optimum = (("none", {"gamma": 1.0}), ("none", {"gamma": 0.5}), ("top:0.5", {"gamma": 0.5}),
                     ("qsgd:4", {"gamma": 0.5}), ("sign", {"gamma": 0.5}), ("rand:0.5", {"gamma": 0.5}))
    buffers = ("h", "u_h", "v", "g", "u_g", "previous", "t")

    def setup(self) -> None:
        self.h = torch.zeros_like(self.x)  # public copy of x
        self.u_h = torch.zeros_like(self.x)  # (W − I) h
        self.v = torch.zeros_like(self.x)  # gradient tracker
        self.g = torch.zeros_like(self.x)  # public copy of v
        self.u_g = torch.zeros_like(self.x)  # (W − I) g
        self.previous = torch.zeros_like(self.x)  # d_{t−1}: the direction the tracker last took in
        self.t = 0  # directions taken in so far
        # a link's copies change only when it carries a message that arrives (a time-varying graph, or losses)
        self.per_link = self.comm.time_varying or self.comm.faults is not None
        if self.per_link:
            self.links = LinkCopies(self)
            # per union out-link and per union in-link (h_in, g_in: None where they are the same rows)
            (self.h, self.h_in), (self.g, self.g_in) = self.links.zeros(), self.links.zeros()
            # the q's on their way of each copy, when messages can be late (faults.late)
            self.delay_h, self.delay_g = self.links.delay_zeros(), self.links.delay_zeros()
            late = ("delay_h", "delay_g") if self.delay_h is not None else ()
            self.buffers = type(self).buffers + ("h_in", "g_in") + late
            return
        # reused every round: the compressor's input and output
        self._diff = torch.empty_like(self.x)
        self._q = torch.empty_like(self.x)

    def _exchange(self, value: torch.Tensor, copy: str, direction: torch.Tensor) -> None:
        """``q = Q(value − copy)``; ``copy += q``; ``direction += (W − I) q``: one message (on a time-varying
        graph or a lossy network one per link, and the direction recomputed over the round's links)."""
        if self.per_link:
            copies = getattr(self, copy), getattr(self, copy + "_in")
            self.links.refresh(value, *copies, delay=getattr(self, "delay_" + copy))
            self.links.consensus(*copies, out=direction)
            return
        copy = getattr(self, copy)
        q = self._compress(torch.sub(value, copy, out=self._diff), out=self._q)
        self.compressor.add_message(q, copy)  # copy += q (a sparse q entry by entry)
        self.comm.gossip_into(q, direction, self_shift=-1.0)

    def step(self, grad, lr: float) -> Traffic:
        gamma = float(self.options.gamma)
        d = self._direction(grad)
        if d is not None:
            if self.t == 0:
                self.v.copy_(d)
            else:
                self.v.add_(self.u_g, alpha=gamma).add_(d).sub_(self.previous)
                self._exchange(self.v, "g", self.u_g)
            self.previous.copy_(d)
            self.t += 1
        self.x.add_(self.u_h, alpha=gamma)
        if d is not None:
            self.x.sub_(self.v, alpha=lr)
        self._exchange(self.x, "h", self.u_h)
        return self.comm.drain()
