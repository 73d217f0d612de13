"""D-PSGD (Lian et al. 2017): exact gossip of the models, no compression.

``paper`` order gossips the old iterates then steps, ``x ← W x − η d``; ``code`` order (the
authors' implementation) steps then gossips, ``x ← W (x − η d)``.

On a network that loses messages a receiver averages what arrived and keeps the weight of a lost message on its
own model (the ``reweight`` rule, bench/faults/reweight.py, applied by the communicator). When messages can also
be late (faults.late) the receiver keeps a copy per in-link of the newest model it has heard from that
neighbour, and mixes with it: a lost or late message leaves the older copy in place, a late one replaces it
when it arrives if nothing newer came meanwhile (the ``stale`` rule of bounded-staleness gossip, W applied to
models up to ``staleness`` rounds old); a neighbour never heard from yet keeps its weight on the receiver.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..comm import Traffic
from ..compressors import make_compressor
from .base import Algorithm, register
from .knobs import KnobOptions, order_knob
from .link_copies import LinkCopies


@dataclass(frozen=True)
class DPSGDOptions(KnobOptions):
    order: Literal["paper", "code"] = order_knob()  # gossip-then-step (paper) or step-then-gossip (code)


@register
class DPSGD(Algorithm):
    name, label = "dpsgd", "D-PSGD"
    exact_forms = (({}, "gossip-then-step", {}), ({"order": "code"}, "step-then-gossip", {}))
    Options = DPSGDOptions
    keeps_average = True
    compresses = False
    fault_rule = "reweight"  # bench/faults/reweight.py: the average is kept when losses are symmetric
    late_rule = "stale"  # the newest model heard per in-link (then a lost message leaves the older copy too)

    def setup(self) -> None:
        self._exact = make_compressor("none")
        self._posted = None  # this round's gossip of x, posted by start_round
        faults = self.comm.faults
        self.stale = faults is not None and faults.spec.delays
        if self.stale:  # the newest model heard per in-link, and what is on its way
            self.links = LinkCopies(self)
            self.heard, self.heard_in = self.links.zeros()
            self.delay = self.links.delay_zeros()
            self.buffers = self.link_state = ("heard", "heard_in", "delay")

    def start_round(self) -> None:
        # the paper order gossips x^t, known before the gradient at x^t: post it now (the exact gossip only; a
        # stale-copy round is worked out in step)
        self._posted = None
        if self.options.order == "paper" and not self.stale:
            self._posted = self.comm.post_gossip(self._exact.compress(self.x))

    def _mix(self, v):
        if self.stale:
            self.links.refresh(v, self.heard, self.heard_in, exact=True, delay=self.delay)
            return self._heard_mix(v)
        return self.comm.gossip(self._exact.compress(v))

    def _heard_mix(self, v):
        """W applied with each worker's own v and, for a neighbour, the newest copy heard of it; a link that has
        delivered nothing yet keeps its weight on the receiver."""
        known = self.delay["round_heard" if self.heard_in is not None else "round_sent"] >= 0
        r = self.links.round()
        ok = known.index_select(0, r.heard).to(v.dtype).unsqueeze(1)
        weight = r.recv_weight * ok
        keep = torch.ones((v.shape[0], 1), dtype=v.dtype, device=v.device)
        keep.index_add_(0, r.recv_rows, weight, alpha=-1.0)
        return v.mul(keep).index_add_(0, r.recv_rows, self.links.heard_rows(self.heard, self.heard_in).mul_(weight))

    def step(self, grad, lr: float) -> Traffic:
        if self.options.order == "paper":  # the direction at x, the step from the mixed models
            d = self._direction(grad)
            posted, self._posted = self._posted, None
            mixed = posted() if posted is not None else self._mix(self.x)
            self.x = mixed if d is None else mixed.sub_(d, alpha=lr)
        else:
            self._descend(grad, lr)
            self.x = self._mix(self.x)
        return self.comm.drain()
