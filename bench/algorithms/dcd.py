"""DCD-PSGD (Tang et al. 2018): gossip, step, then broadcast the compressed *difference*.

Every holder of a replica of ``x_i`` applies the same ``q_i``, so replicas stay exact and
``s_i = Σ_j w_ij x_j`` can be kept up to date from the ``q``'s alone:
``x^{t+½} = s − η d``, ``q = Q(x^{t+½} − x)``, ``x += q``, ``s += Σ_j w_ij q_j``.
The replicas are set up once by an exact exchange of the initial models (counted in step 1).

On a time-varying graph (one-peer-exp) a worker hears each neighbour only in the rounds that use their link,
so the replicas are kept per directed link e = j → i (``r_e``, held alike by j and i) and sent what they miss.
In a round, on each of its links:

    r_e += m_e,  m_e = Q(x_j − r_e)     (the first message of a link is x_j itself, exact: r_e = x_j)
    s_i = w_ii x_i + Σ_{e = j→i} w_e r_e;   x^{t+½} = s − η d;   q = Q(x^{t+½} − x);   x += q

``x_j − r_e`` is the difference the link has not carried yet: where a link is used every round it is the last
``q_j``, and for an idempotent operator (``sign``, ``top``) m_e = q_j, which is DCD exactly; one-peer-exp uses
a link once a period, so m_e compresses the sum of that many ``q``'s and what it drops stays in ``x_j − r_e``
for the link's next round. ``q`` itself travels nowhere. Memory per worker: a replica per union out-link and
one per union in-link (log₂ n of each on one-peer-exp), and a flag per union link. Bits per round: one message
per active out-link (``Q``'s, exact float32 in the rounds that first use a link: the first period).
"""
from __future__ import annotations

from ..comm import Traffic
from ..compressors import make_compressor
from .base import Algorithm, register
from .link_copies import LinkCopies


@register
class DCD(Algorithm):
    name, label = "dcd", "DCD-PSGD"
    exact_forms = (({}, "dpsgd", {}),)
    first_round_messages = 2  # and the exact exchange that sets up the neighbours' replicas
    buffers = ("s",)

    def setup(self) -> None:
        if self.comm.time_varying:
            self.links = LinkCopies(self)
            self.replica, self.replica_in = self.links.zeros()  # per union out-link, per union in-link
            self.unused = self.links.unused()
            self.buffers = ("replica", "replica_in", "unused")
            return
        self.s = self.comm.gossip(make_compressor("none").compress(self.x))

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)
        if self.comm.time_varying:
            self.links.refresh(self.x, self.replica, self.replica_in, exact=self.links.first_use(self.unused))
            target = self.links.mix(self.x, self.replica, self.replica_in)
            if d is not None:
                target.sub_(d, alpha=lr)
            self.x.add_(self._compress(target.sub_(self.x)).values)
            return self.comm.drain()
        target = self.s.clone() if d is None else self.s - lr * d
        q = self._compress(target.sub_(self.x))
        self.x.add_(q.values)
        self.s.add_(self.comm.gossip(q))
        return self.comm.drain()
