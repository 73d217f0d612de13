"""Choco-SGD (Koloskova et al., Algorithm 1), in its efficient form where only ``q`` travels.

State per worker: the model ``x_i``, its public copy ``x̂_i`` (starts at 0) and the consensus
direction ``u_i = Σ_j w_ij x̂_j − x̂_i`` (the paper's ``s_i − x̂_i``, kept directly so that a round
updates it in place: ``u += Σ_j w_ij q_j − q_i``). ``paper`` order: SGD step, ``q = Q(x − x̂)``,
exchange, ``x̂ += q``, ``u += (W − I) q``, then ``x += γ u``. ``code`` order (the authors'
implementation, so that sending overlaps the next gradient): SGD step, consensus step with the
previous round's ``s, x̂``, then compress and exchange. With ``grad=None`` this is Choco-Gossip.

On a time-varying graph (one-peer-exp) a worker hears a neighbour only in the rounds that use their link, so
the public copy is kept per directed link e = j → i: ``x̂_e``, a copy of x_j held alike by j and i, from 0. In
a round, on each of its links, ``q_e = Q(x_j − x̂_e)`` travels on e and ``x̂_e += q_e`` at both ends; then

    u_i = Σ_{e = j→i} w_e x̂_e − Σ_{e = i→k} w_e x̂_e        (over the round's links)

and ``x += γ u``. Each link adds w_e x̂_e at its receiver and takes it from its sender, so u sums to zero over
the workers and the average never moves; with the identity and γ = 1, x̂_e = x_j and u = (W_t − I) x (the
columns of W_t sum to 1), so x ← W_t x; where a worker's copies agree (every link used every round, a
deterministic operator) u is the static (W − I) x̂ and the iterates are the static method's.
The orders keep their meaning: ``paper`` applies u of the round's own links, just refreshed; ``code`` applies
u of the previous round's links (refreshed then), before this round's messages.

On a network that loses messages (the run's faults) the copies are kept per link too, on any graph, with an
acknowledgement rule: a lost q_e is added at neither end (the sender learns of the loss), so the two ends of
every link keep the same copy and u still sums to zero over the workers: the average is kept, whatever is
lost (tests/test_faults_methods.py). A late q_e (faults.late) is added at both ends when it arrives, staleness rounds
on (the sender learns of it then): meanwhile the sender's next q_e is taken against a copy that lacks it, so it
is sent again in part, and the copies still agree at both ends, so the average is kept. Memory per worker: a copy per
union out-link and one per union in-link (log₂ n of each on one-peer-exp), and u. Bits per round: one
message per active out-link (one on one-peer-exp).

AdaGossip (Aketi, Hashemi & Roy 2024, AdaG-SGD: option ``adagossip``) replaces the one γ by a step per worker
and coordinate from the consensus direction itself (the compressed model differences): with u_i as above,

    v_i ← β v_i + (1 − β) u_i ⊙ u_i,    γ_i = min(γ / (√(v_i / (1 − βᵗ)) + ε), 1),    x_i += γ_i ⊙ u_i

(the paper's second moment of the gossip error, divided by 1 − βᵗ as in Adam; t counts consensus steps), as the
authors run it (aparna-aketi/AdaG_SGD, ``gossip_choco/distributed.py``): each coordinate's step capped at 1, so
that a coordinate whose neighbours barely disagree moves at most to the exchanged average, and γ = 1 by default
(their ``trainer.py``; ``auto`` is ``ADAGOSSIP_GAMMA``, and a study's grid tunes γ like any other knob). Without
the cap (``ada_cap=false``, this suite's form before 2026-12-07) a step of
γ/ε on a settled coordinate overshoots: gossip alone stalls (tests/test_adagossip.py). The steps differ between
workers, so the average is no longer kept exactly.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import torch

from ..comm import Traffic
from .base import AUTO, Algorithm, register
from .knobs import decay, flag, knob, order_knob, positive
from .step_tuning import ConsensusStepOptions, TunesItsStep
from .link_copies import LinkCopies

# AdaGossip's base step γ when left to auto: the authors' default (AdaG_SGD trainer.py, --gamma 1.0)
ADAGOSSIP_GAMMA = 1.0


@dataclass(frozen=True)
class ChocoOptions(ConsensusStepOptions):
    """γ, the order of step and gossip, and AdaGossip, which turns γ into the base of a step per coordinate,
    min(γ/(√v + ε), 1), v the running mean of the squared consensus direction; under it γ = auto is the
    authors' base step 1."""

    order: Literal["paper", "code"] = order_knob()
    adagossip: bool = knob(False, flag)  # AdaGossip's adaptive consensus step (AdaG-SGD)
    ada_beta: float = knob(0.999, decay)  # β of v ← βv + (1 − β) u², bias-corrected as in Adam
    ada_eps: float = knob(1e-8, positive)  # ε of γ/(√v + ε)
    ada_cap: bool = knob(True, flag)  # each coordinate's step at most 1, as the authors' code clamps it


@register
class Choco(TunesItsStep, Algorithm):
    name, label = "choco", "Choco-SGD"
    Options = ChocoOptions
    keeps_average = True
    consensus_slope, headline = -4.0, True
    contraction = True
    consensus_step = True
    fault_rule = "ack"  # copies per link, a lost message added at neither end: the average is kept
    late_rule = "ack"  # a late message added at both ends when it arrives
    examples = ({"gamma": 0.5}, {"gamma": 0.5, "order": "code"}, {"gamma": 0.05, "adagossip": True})
    # the code order: D-PSGD's gossip-then-step, with the previous round's W (the copies the step before refreshed)
    exact_forms = (({"gamma": 1.0}, "dpsgd", {"order": "code"}), ({"gamma": 1.0, "order": "code"}, "gossip-then-step",
                                                                  {"lag": 1}))
    buffers = ("x_hat", "u")

    @classmethod
    def identity(cls, raw: dict, compressor: str) -> dict:
        # AdaGossip's step gained the authors' cap (2026-12-07): its earlier runs are not these; Choco's keep their ids
        out = super().identity(raw, compressor)
        return {**out, "adagossip_revision": 1} if raw.get("adagossip") is True else out

    @classmethod
    def keeps_average_with(cls, options) -> bool:
        # a step per worker and coordinate, γ_i ⊙ u_i, no longer sums to zero over the workers
        return not options.adagossip

    @classmethod
    def variant(cls, options) -> tuple[str, str] | None:
        return ("choco+adagossip", "Choco-SGD + AdaGossip") if options.adagossip else None

    @classmethod
    def resolve_options(cls, options, topology, compressor, seed: int = 0, quiet: bool = True):
        if options.adagossip and options.gamma == AUTO:  # adaptive: nothing to tune
            gamma = ADAGOSSIP_GAMMA
            return dataclasses.replace(options, gamma=gamma), {
                "gamma": {"value": gamma, "source": "AdaGossip's base step (the authors' default)"}}
        return super().resolve_options(options, topology, compressor, seed, quiet)

    def setup(self) -> None:
        self.u = torch.zeros_like(self.x)
        if self.options.adagossip:
            self.v = torch.zeros_like(self.x)  # the running mean of u ⊙ u
            self.ada_steps = 0
            self._ada = torch.empty_like(self.x)
            self.buffers = type(self).buffers + ("v", "ada_steps")
        self.per_link = self.comm.time_varying or self.comm.faults is not None
        if self.per_link:  # a link's copy changes only when it carries a message that arrives
            self.links = LinkCopies(self)
            self.x_hat, self.x_hat_in = self.links.zeros()  # per union link: [out-links, d], [in-links, d]
            self.delay = self.links.delay_zeros()  # the q's on their way when messages can be late
            self.buffers = ("x_hat", "x_hat_in", "u") + (("delay",) if self.delay is not None else ()) + \
                (("v", "ada_steps") if self.options.adagossip else ())
            return
        self.x_hat = torch.zeros_like(self.x)
        # reused every round: no [w, d] allocation (and page faults) for x − x̂ or for Q(x − x̂); an operator that
        # compresses in place (sign, none) writes Q(x − x̂) over x − x̂, which nothing reads again: one [w, d]
        # buffer less in the cache, the same bits
        self._buffers()

    def _buffers(self) -> None:
        self._diff = torch.empty_like(self.x)
        self._q = self._diff if self.compressor.compresses_in_place else torch.empty_like(self.x)

    def _exchange(self) -> None:
        if self.per_link:
            self.links.refresh(self.x, self.x_hat, self.x_hat_in, delay=self.delay)
            self.links.consensus(self.x_hat, self.x_hat_in, out=self.u)
            return
        if self._diff is None or self._diff.shape != self.x.shape:
            self._buffers()
        q = self._compress(torch.sub(self.x, self.x_hat, out=self._diff), out=self._q)
        self.compressor.add_message(q, self.x_hat)  # x̂ += q (a sparse q entry by entry)
        self.comm.gossip_into(q, self.u, self_shift=-1.0)

    def _consensus(self) -> None:
        o = self.options
        if not o.adagossip:
            # x += γ u: the mean over workers of u is zero because W is doubly stochastic
            self.x.add_(self.u, alpha=o.gamma)
            return
        # AdaGossip: x += min(γ / (√(v / (1 − βᵗ)) + ε), 1) u, v ← βv + (1 − β) u²
        self.ada_steps += 1
        self.v.mul_(o.ada_beta).addcmul_(self.u, self.u, value=1.0 - o.ada_beta)
        torch.div(self.v, 1.0 - o.ada_beta ** self.ada_steps, out=self._ada).sqrt_().add_(o.ada_eps)
        torch.div(o.gamma, self._ada, out=self._ada)  # the step per coordinate
        if o.ada_cap:
            self._ada.clamp_(max=1.0)
        self.x.addcmul_(self.u, self._ada)

    def step(self, grad, lr: float) -> Traffic:
        self._descend(grad, lr)
        if self.options.order == "paper":
            self._exchange()
            self._consensus()
        else:
            self._consensus()
            self._exchange()
        return self.comm.drain()
