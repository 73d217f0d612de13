"""Copies kept per directed link, for the methods that keep public copies (Choco's x̂, DCD's replicas, ECD's
estimates, BEER's h and g) on a graph whose links change from round to round.

On a static graph one copy per worker is enough: every neighbour receives every message, so all hold the same
copy, and ``(W − I)·copy`` can be kept up to date by increments. On a time-varying graph a link j → i carries a
message only in the rounds that use it, so what i knows of j is the copy *of that link*, changed only when the
link is active. Per directed link e of the period's union both ends hold the same copy c_e: the sender among
the copies of its out-links (``sent``), the receiver among those of its in-links (``heard``). Where one process
holds every worker (the simulator) the two are the same rows, kept once (``heard`` is None).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..comm.base import LocalLinks
from ..compressors import Message, make_compressor


@dataclass(frozen=True)
class Round:
    """One round's active links: their positions among the copies, and the local rows and weights they concern."""

    ids: torch.Tensor  # [E] union id of every link of the round (all processes know them all)
    sent: torch.Tensor  # [E_out] position in ``sent`` of each link this process sends on
    heard: torch.Tensor  # [E_in] position in ``heard`` of each link it receives on (in the order of links().into)
    send_rows: torch.Tensor  # [E_out] local row of the sender
    recv_rows: torch.Tensor  # [E_in] local row of the receiver
    send_weight: torch.Tensor  # [E_out, 1] w_{dst, src} of each out-link
    recv_weight: torch.Tensor  # [E_in, 1]


class LinkCopies:
    """The bookkeeping of an algorithm's per-link copies (the copies themselves are the algorithm's tensors,
    so that they are checkpointed with it). Messages are one compressed row per active out-link
    (``Communicator.exchange``), their randomness drawn one row per link."""

    def __init__(self, algorithm):
        self.comm = algorithm.comm
        self.compressor, self.generator, self.segments = algorithm.compressor, algorithm.generator, algorithm.segments
        self.union = self.comm.union_links()
        self.like = algorithm.x[:0]  # dtype and device of the copies
        self.d = algorithm.x.shape[1]
        E = self.union.links.E
        self.shared = (self.union.out.start == 0 and self.union.out.stop == E
                       and np.array_equal(self.union.into, np.arange(E)))
        self._rounds: dict[LocalLinks, Round] = {}  # keyed by the object itself (hashed by identity)
        self._exact = make_compressor("none")

    # -- state ------------------------------------------------------------------------------
    def zeros(self, dtype=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """New copies (sent, heard) of zeros, ``[links, d]`` (``[links]`` for an integer ``dtype``)."""
        union, like = self.union, self.like
        shape = () if dtype is not None and not dtype.is_floating_point else (self.d,)
        dtype = dtype or like.dtype
        sent = torch.zeros((union.out.stop - union.out.start, *shape), dtype=dtype, device=like.device)
        heard = None if self.shared else torch.zeros((len(union.into), *shape), dtype=dtype, device=like.device)
        return sent, heard

    def unused(self) -> torch.Tensor:
        """A flag per union link (every link, on every process): whether it has carried a message yet."""
        return torch.ones(self.union.links.E, dtype=torch.bool, device=self.like.device)

    def round(self) -> Round:
        """This round's links, made once per round of the period (the communicator keeps one LocalLinks each)."""
        local = self.comm.links()
        if local not in self._rounds:
            ids = local.links.ids_in(self.union.links)
            device, dtype = self.like.device, self.like.dtype

            def index(values):
                return torch.as_tensor(np.ascontiguousarray(values), dtype=torch.int64, device=device)

            self._rounds[local] = Round(
                ids=index(ids), sent=index(ids[local.out] - self.union.out.start),
                heard=index(np.searchsorted(self.union.into, ids[local.into])),  # union.into is in link order
                send_rows=local.tensor("send_rows", device), recv_rows=local.tensor("recv_rows", device),
                send_weight=local.tensor("send_weight", device, dtype).unsqueeze(1),
                recv_weight=local.tensor("recv_weight", device, dtype).unsqueeze(1))
        return self._rounds[local]

    def first_use(self, unused: torch.Tensor) -> bool:
        """Whether this round has a link that carries its first message (then all its links are marked used).
        Every process sees every link, so all agree on it (one encoding per round)."""
        ids = self.round().ids
        first = bool(unused[ids].any())
        unused[ids] = False
        return first

    # -- messages ----------------------------------------------------------------------------
    def compress(self, values: torch.Tensor) -> Message:
        """The message of ``values`` (one row per out-link of this round), drawing one row of randomness per link."""
        return self.compressor.compress(values, self.comm.links().stream(self.generator), self.segments)

    def sent_rows(self, sent: torch.Tensor) -> torch.Tensor:
        """The sender's copies of this round's out-links, ``[E_out, d]`` (a new tensor)."""
        return sent.index_select(0, self.round().sent)

    def heard_rows(self, sent: torch.Tensor, heard: torch.Tensor | None) -> torch.Tensor:
        """The receiver's copies of this round's in-links, ``[E_in, d]`` (a new tensor)."""
        return (sent if heard is None else heard).index_select(0, self.round().heard)

    def put(self, sent: torch.Tensor, heard: torch.Tensor | None, mine: torch.Tensor, received: torch.Tensor) -> None:
        """Set the copies of this round's links: ``mine`` at the sending end, ``received`` at the receiving one."""
        r = self.round()
        sent.index_copy_(0, r.sent, mine)
        if heard is not None:
            heard.index_copy_(0, r.heard, received)

    def refresh(self, value: torch.Tensor, sent: torch.Tensor, heard: torch.Tensor | None,
                exact: bool = False, delay: dict | None = None) -> None:
        """Choco's update of a public copy on each active link e = j → i: ``q_e = Q(value_j − c_e)`` travels
        on e and both ends add it, ``c_e += q_e``. ``exact``: the link carries ``value_j`` itself, ``c_e = value_j``.
        ``delay`` (from ``delay_zeros``): the messages still on their way when the run has late ones; each
        end applies a late message when it arrives, ``staleness`` rounds on (the sender learns of it then, as
        an acknowledgement would tell it), and an exact copy takes it only if it is newer than what it holds."""
        r = self.round()
        if delay is not None:
            self._arrive(sent, heard, delay, exact)
        rows = value.index_select(0, r.send_rows)
        acked, heard_ok, late_out, late_in = self._deliveries(delay is not None)
        if exact:
            message = self._exact.compress(rows)
            received = self.comm.exchange(message)
            if acked is None:
                self.put(sent, heard, message.values, received)
                return
            if delay is not None:
                self._hold(delay, "sent", r.sent, message.values, late_out, True)
                if heard is not None:
                    self._hold(delay, "heard", r.heard, received, late_in, True)
                acked, heard_ok = acked & ~late_out, heard_ok & ~late_in
                delay["round_sent"][r.sent[acked[:, 0]]] = self.comm.round
                if heard is not None:
                    delay["round_heard"][r.heard[heard_ok[:, 0]]] = self.comm.round
            mine = torch.where(acked, message.values, self.sent_rows(sent))
            self.put(sent, heard, mine, torch.where(heard_ok, received, self.heard_rows(sent, heard)))
            return
        q = self.compress(rows.sub_(self.sent_rows(sent)))
        received = self.comm.exchange(q)  # before the copies change: the message may refer to its input
        if delay is not None:
            self._hold(delay, "sent", r.sent, q.values, late_out, False)
            acked = acked & ~late_out
            if heard is not None:
                self._hold(delay, "heard", r.heard, received, late_in, False)
                received = received * ~late_in
        sent.index_add_(0, r.sent, q.values if acked is None else q.values * acked)
        if heard is not None:
            heard.index_add_(0, r.heard, received)  # a lost message arrives as zeros: the copy stays

    def _deliveries(self, late: bool = False):
        """(acked [E_out, 1], heard [E_in, 1]) boolean columns of this round's links, or (None, None) when
        every message arrives, then (late_out, late_in) the same for the late ones (None without ``late``).
        The acknowledgement rule: a sender adds its message to the link's copy only when it arrived, so both
        ends of every link keep the same copy whatever is lost."""
        if self.comm.faults is None:
            return None, None, None, None
        device = self.like.device

        def column(mask):
            return torch.as_tensor(mask, device=device).reshape(-1, 1)

        out_ok, in_ok = self.comm.delivered()
        if not late:
            return column(out_ok), column(in_ok), None, None
        out_late, in_late = self.comm.late()
        return column(out_ok), column(in_ok), column(out_late), column(in_late)

    # -- late messages (faults.late) -------------------------------------------------------------
    def delay_zeros(self) -> dict | None:
        """The messages on their way, per union link and arrival slot (round mod staleness), for a run whose
        messages can be late; None otherwise. An algorithm keeps it among its buffers (it is checkpointed)."""
        faults = self.comm.faults
        if faults is None or not faults.spec.delays:
            return None
        tau, like = faults.spec.staleness, self.like
        sent, heard = self.zeros()
        state = {"pending_sent": sent.unsqueeze(0).repeat(tau, 1, 1),
                 "pending_heard": None if heard is None else heard.unsqueeze(0).repeat(tau, 1, 1)}
        for side, rows in (("sent", sent), ("heard", heard)):  # exact copies: which slot holds a message, and
            if rows is not None:                              # the round of the message each copy holds
                state[f"valid_{side}"] = torch.zeros((tau, rows.shape[0]), dtype=torch.bool, device=like.device)
                state[f"round_{side}"] = torch.full((rows.shape[0],), -1, dtype=torch.int64, device=like.device)
        return state

    def _arrive(self, sent: torch.Tensor, heard: torch.Tensor | None, delay: dict, exact: bool) -> None:
        """The messages sent ``staleness`` rounds ago reach both ends of their links now."""
        tau = delay["pending_sent"].shape[0]
        t = self.comm.round
        slot, then = t % tau, t - tau
        for side, copies in (("sent", sent), ("heard", heard)):
            if copies is None:
                continue
            pending = delay[f"pending_{side}"][slot]
            if exact:
                valid, held = delay[f"valid_{side}"][slot], delay[f"round_{side}"]
                newer = valid & (held < then)
                copies[newer] = pending[newer]
                held[newer] = then
                valid.zero_()
            else:
                copies.add_(pending)
                pending.zero_()

    def _hold(self, delay: dict, side: str, ids: torch.Tensor, rows: torch.Tensor, late: torch.Tensor,
              exact: bool) -> None:
        """Keep this round's late messages (``late``: a column of this round's links) until they arrive."""
        pending = delay[f"pending_{side}"][self.comm.round % delay["pending_sent"].shape[0]]
        if exact:
            k = self.comm.round % delay["pending_sent"].shape[0]
            mine = late[:, 0]
            pending.index_copy_(0, ids[mine], rows[mine])
            delay[f"valid_{side}"][k, ids[mine]] = True
        else:
            pending.index_add_(0, ids, rows * late)

    # -- mixing with the copies ---------------------------------------------------------------
    def consensus(self, sent: torch.Tensor, heard: torch.Tensor | None, out: torch.Tensor) -> torch.Tensor:
        """``out_i = Σ_{e = j→i} w_e c_e − Σ_{e = i→k} w_e c_e`` over this round's links: (W_t − I)·copy where a
        worker's copies agree, and a sum of zero over the workers whatever they are (each link adds its
        w_e c_e at its receiver and takes it away at its sender)."""
        r = self.round()
        out.zero_()
        out.index_add_(0, r.recv_rows, self.heard_rows(sent, heard).mul_(r.recv_weight))
        out.index_add_(0, r.send_rows, self.sent_rows(sent).mul_(r.send_weight), alpha=-1.0)
        return out

    def own(self, sent: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """What this round's out-links hold of each worker: ``Σ_{e = i→k} w_e c_e / Σ_{e = i→k} w_e`` (its copy,
        where all of them agree), ``value_i`` for a worker that sends on no link (a new tensor)."""
        r = self.round()
        weight = torch.zeros((value.shape[0], 1), dtype=value.dtype, device=value.device)
        weight.index_add_(0, r.send_rows, r.send_weight)
        total = torch.zeros_like(value).index_add_(0, r.send_rows, self.sent_rows(sent).mul_(r.send_weight))
        return torch.where(weight > 0, total / weight.clamp_min(torch.finfo(value.dtype).tiny), value)

    def mix(self, value: torch.Tensor, sent: torch.Tensor, heard: torch.Tensor | None) -> torch.Tensor:
        """``(1 − Σ_{e→i} w_e) value_i + Σ_{e = j→i} w_e c_e``: W_t applied with the worker's own value for its
        own row and the heard copies for its neighbours' (a new tensor)."""
        r = self.round()
        keep = torch.ones((value.shape[0], 1), dtype=value.dtype, device=value.device)
        keep.index_add_(0, r.recv_rows, r.recv_weight, alpha=-1.0)
        return value.mul(keep).index_add_(0, r.recv_rows, self.heard_rows(sent, heard).mul_(r.recv_weight))
