"""ECD-PSGD (Tang et al. 2018), extrapolation compression, as the authors implemented it.

Workers keep estimates ``y_j`` of their neighbours' models; only ``s_i = Σ_j w_ij y_j`` is
needed. With t counting from 1: ``x^{t+1} = s − η d``, ``z = (1 − t/2) x^t + (t/2) x^{t+1}``,
``q = Q(z)`` is sent, and every holder sets ``y ← (1 − 2/t) y + (2/t) q`` (so
``s ← (1 − 2/t) s + (2/t) Σ_j w_ij q_j``). The estimates start from the initial models,
exchanged exactly once (counted in step 1).

With a sparsifier (``top``, ``rand``) only the transmitted coordinates of an estimate move, as in
the authors' code: ``y_j[idx] ← (1 − 2/t) y_j[idx] + (2/t) q_j[idx]``, the others stay (scaling
them too would flip their sign at t = 1 and zero them at t = 2). Every holder of ``y_j`` applies
the same update, so worker j knows it too: j keeps ``y_j`` and sends, on the positions it chose,
the change ``m_j = (2/t)(q_j − y_j)`` instead of ``q_j`` (the same positions and bits); holders add
``Σ_j w_ij m_j`` to ``s``.

On a time-varying graph (one-peer-exp) a link carries messages only in the rounds that use it, so the
estimate, its clock and the extrapolation's anchor are kept per directed link e = j → i: the estimate
``y_e`` and the count ``c_e`` of messages the link carried (held alike by j and i), and, at the sender only,
``p_e``, the model x_j the link last carried. The extrapolation runs on the link's own clock. In a round, on
each of its links (the first message of a link is x_j itself, exact: ``y_e = p_e = x_j``, as the initial
exchange)::

    c_e += 1;  z_e = (1 − c_e/2) p_e + (c_e/2) x_j;  q_e = Q(z_e) travels;  y_e ← (1 − 2/c_e) y_e + (2/c_e) q_e;
    p_e = x_j;  then  x_i ← w_ii ŷ_i + Σ_{e = j→i} w_e y_e − η d_i,   ŷ_i = Σ_{e = i→k} w_e y_e / Σ_{e = i→k} w_e

(a sparsifier moves and sends only its coordinates, as above). ŷ_i is the estimate of x_i its round's links
hold (the static method's y_i). Where every link is used every round, the links out of a worker carry the same
messages, so for a deterministic operator (``sign``, ``top``) this is the static method exactly; with the
identity y_e = x_j and it is exact gossip x ← W_t x − η d. Memory per worker:
an estimate per union out-link and per union in-link and an anchor per union out-link (3 log₂ n copies on
one-peer-exp), a count per link and a flag per union link. Bits per round: one message per active out-link
(exact float32 in the rounds that first use a link: the first period).
"""
from __future__ import annotations

import torch

from ..comm import Traffic
from ..compressors import make_compressor
from .base import Algorithm, register
from .link_copies import LinkCopies


@register
class ECD(Algorithm):
    name, label = "ecd", "ECD-PSGD"
    exact_forms = (({}, "dpsgd", {}),)
    first_round_messages = 2  # and the exact exchange that sets up the neighbours' replicas
    revision = 1  # sparsifiers move only the coordinates they send (runs of the earlier update had none)
    buffers = ("s", "t", "y")

    def setup(self) -> None:
        if self.comm.time_varying:
            self.links = LinkCopies(self)
            self.y, self.y_in = self.links.zeros()  # y_e at both ends
            self.count, self.count_in = self.links.zeros(torch.int64)  # c_e at both ends
            self.anchor, _ = self.links.zeros()  # p_e, at the sender
            self.unused = self.links.unused()
            self.buffers = ("y", "y_in", "count", "count_in", "anchor", "unused")
            return
        self.s = self.comm.gossip(make_compressor("none").compress(self.x))
        self.t = 1
        # the estimate every neighbour holds of each local worker (only sparsifiers need it)
        self.y = self.x.clone() if self.compressor.sparse else None

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        if self.comm.time_varying:
            self._estimate()
            # the worker's own term is its estimate too, as the round's out-links carried it (the static s has y_i)
            mixed = self.links.mix(self.links.own(self.y, self.x), self.y, self.y_in)
            self.x = mixed if d is None else mixed.sub_(d, alpha=lr)
            return self.comm.drain()
        t = float(self.t)
        x_next = self.s.clone() if d is None else self.s - lr * d
        z = self.x.mul(1.0 - t / 2.0).add_(x_next, alpha=t / 2.0)
        q = self._compress(z)
        self.x = x_next
        if self.y is None:
            self.s.mul_(1.0 - 2.0 / t).add_(self.comm.gossip(q), alpha=2.0 / t)
        else:
            change = self.compressor.on_support(q, (q.values - self.y).mul_(2.0 / t))
            self.y.add_(change.values)
            self.s.add_(self.comm.gossip(change))
        self.t += 1
        return self.comm.drain()

    def _estimate(self) -> None:
        """This round's message on each active link, and the estimates it moves at both of its ends."""
        links, r = self.links, self.links.round()
        model = self.x.index_select(0, r.send_rows)
        if links.first_use(self.unused):
            links.refresh(self.x, self.y, self.y_in, exact=True)
            self.anchor.index_copy_(0, r.sent, model)
            return
        self.count.index_add_(0, r.sent, torch.ones_like(r.sent))
        if self.count_in is not None:
            self.count_in.index_add_(0, r.heard, torch.ones_like(r.heard))
        c = self.count.index_select(0, r.sent).unsqueeze(1).to(model.dtype)
        z = self.anchor.index_select(0, r.sent).mul_(1.0 - c / 2.0).add_(model * (c / 2.0))
        q = links.compress(z)
        mine = links.sent_rows(self.y)
        if self.compressor.sparse:  # the change of the estimate on the sent coordinates, the rest stays
            change = self.compressor.on_support(q, (q.values - mine).mul_(2.0 / c))
            received = self.comm.exchange(change)
            links.put(self.y, self.y_in, mine.add_(change.values), links.heard_rows(self.y, self.y_in).add_(received))
        else:
            received = self.comm.exchange(q)
            c_in = c if self.count_in is None else self.count_in.index_select(0, r.heard).unsqueeze(1).to(model.dtype)
            theirs = links.heard_rows(self.y, self.y_in).mul_(1.0 - 2.0 / c_in).add_(received * (2.0 / c_in))
            links.put(self.y, self.y_in, mine.mul_(1.0 - 2.0 / c).add_(q.values * (2.0 / c)), theirs)
        self.anchor.index_copy_(0, r.sent, model)
