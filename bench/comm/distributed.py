"""torch.distributed runtime: each process holds a contiguous block of workers (rows lo..hi-1).

Every message travels on its directed link j → i, as in the simulator's count: a gossip sends the real
encoded payload of worker j once on every link to a worker held by another process, an edge exchange sends
each link's own message, both point to point (gloo on CPU, NCCL on GPU), one send per link; links between two
workers of one process are copied in memory (and counted all the same). The all-reduce and the all-gather are
rings of point-to-point sends over the processes, so the bytes handed to torch.distributed are what those
collectives put on each link. Time is measured, per round and per incoming link; the α–β model's prediction is
kept beside it. A gossip posted before the round's gradient (``post_gossip``: D-PSGD's paper order) sends at
once and records as comm time only the wait after the gradient. A time-varying topology has one plan per round
of its period; ``round`` (advanced by ``drain``, which ends every algorithm's step) picks it. Small global
sums (the losses read every 10 steps, flags) go through process 0 (``_star_sum``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ..compressors import Compressor, Message
from ..compressors.wire import decode, encode
from ..errors import BenchError
from ..topology import Topology
from ..topology.links import Links
from ..faults import delivered_weights, reweighted
from .accounting import account_allgather, account_allreduce, account_exchange, account_gossip, link_arrivals
from .base import Communicator, LocalLinks, Traffic
from .mixing import csr_like
from .netmodel import NetworkModel, make_network


# global_mean of at most this many numbers goes through process 0 (``_star_sum``), not gloo's ring all-reduce;
# its messages carry a tag no link id reaches
STAR_MAX = 1024
STAR_TAG = 1 << 30


# our block of W mixes by a dense product up to this many entries (one worker a process: 1 + its in-links)
DENSE_MIX_MAX = 64


def block_of(n: int, world: int, rank: int) -> tuple[int, int]:
    if n % world:
        raise BenchError(f"nodes={n} must be a multiple of the number of processes ({world})")
    k = n // world
    return rank * k, (rank + 1) * k


@dataclass(frozen=True, eq=False)
class _Plan:
    """One round's links for this process: per peer process, the ids of the links we send to it
    (``send_to``) and receive from it (``recv_from``), in link order; and our rows of W over the columns a
    gossip then holds (our workers first, then one per received link in (peer, link) order)."""

    local: LocalLinks
    send_to: dict[int, np.ndarray]
    recv_from: dict[int, np.ndarray]
    w_local: np.ndarray
    columns: tuple[int, ...]  # the received links, in the order of w_local's columns after our workers'

    @classmethod
    def of(cls, W: np.ndarray, links: Links, lo: int, hi: int, k: int,
           delivered: np.ndarray | None = None, pairwise: bool = False) -> "_Plan":
        local = LocalLinks.of(links, lo, hi)
        owner_src, owner_dst = links.src // k, links.dst // k
        rank = lo // k
        outgoing = np.arange(local.out.start, local.out.stop)
        send_to = {int(p): outgoing[owner_dst[outgoing] == p] for p in np.unique(owner_dst[outgoing]) if p != rank}
        incoming = local.into
        recv_from = {int(p): incoming[owner_src[incoming] == p] for p in np.unique(owner_src[incoming]) if p != rank}
        received = tuple(int(e) for p in sorted(recv_from) for e in recv_from[p])
        w_local = np.zeros((hi - lo, (hi - lo) + len(received)))
        w_local[:, : hi - lo] = W[lo:hi, lo:hi]  # the diagonal and the links inside this process
        weight = links.weight if delivered is None else delivered_weights(links, delivered, pairwise)  # lost: 0
        for column, e in enumerate(received):
            w_local[links.dst[e] - lo, hi - lo + column] = weight[e]
        return cls(local, send_to, recv_from, np.ascontiguousarray(w_local), received)


class DistributedCommunicator(Communicator):
    def __init__(self, topology: Topology, compressor: Compressor, segments: list[int] | None,
                 network: NetworkModel | None = None, faults=None):
        super().__init__()
        self.faults = faults  # a bench.faults.FaultSchedule (every process computes the same losses), or None
        self.topology, self.compressor, self.segments = topology, compressor, segments
        self.network = network or make_network()
        self.n = topology.n
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.lo, self.hi = block_of(self.n, self.world, self.rank)
        k = self.hi - self.lo
        # who sends what to whom, per phase of the period (a static graph has one phase); round t uses
        # phase t mod period, and drain() ends a round (every algorithm's step ends with it)
        self._plans = [_Plan.of(topology.W_at(phase), topology.links_at(phase), self.lo, self.hi, k)
                       for phase in range(topology.period)]
        self.round = 0
        self._matrices: dict[tuple, torch.Tensor] = {}
        self.bytes_sent = 0  # handed to torch.distributed by this process
        self.link_bytes: dict[tuple[int, int], int] = {}  # per directed link this process sends on (in-memory too)
        # per link this process receives on: [messages, measured seconds to arrival, modelled seconds]
        self.link_times: dict[tuple[int, int], list[float]] = {}
        self.predicted_comm_s = 0.0  # the α–β model of the run's network preset
        self.calibrated: NetworkModel | None = None  # fitted by ping-pong on this backend, if asked
        self.predicted_calibrated_s = 0.0

    # -- this round's links ----------------------------------------------------------------------
    @property
    def phase(self) -> int:
        return self.round % len(self._plans)

    @property
    def plan(self) -> _Plan:
        return self._plans[self.phase]

    def links(self) -> LocalLinks:
        return self.plan.local

    def drain(self) -> Traffic:
        done = super().drain()
        self.round += 1
        return done

    def describe_runtime(self, rounds: int) -> dict:
        rounds = max(rounds, 1)
        per_link = [{"src": s, "dst": d, "messages": int(m), "measured_arrival_s": t / max(m, 1),
                     "model_arrival_s": model / max(m, 1)} for (s, d), (m, t, model) in sorted(self.link_times.items())]
        return {"predicted_comm_s": self.predicted_comm_s, "predicted_comm_per_round_s": self.predicted_comm_s / rounds,
                "calibration": self.calibrated.describe() if self.calibrated is not None else None,
                "predicted_calibrated_comm_per_round_s": self.predicted_calibrated_s / rounds,
                "bytes_sent_rank0": self.bytes_sent,
                "link_bytes_rank0": [{"src": s, "dst": d, "bytes": b} for (s, d), b in sorted(self.link_bytes.items())],
                "link_times_rank0": per_link}

    def _settle(self, modelled: Traffic, calibrated_cost, start: float) -> None:
        """Record ``modelled`` (the count and the model's time under the run's network) with the measured time
        since ``start``; the model's time and, if calibrated, ``calibrated_cost(network)`` go beside it."""
        self.predicted_comm_s += modelled.comm_time_s
        if self.calibrated is not None:
            self.predicted_calibrated_s += calibrated_cost(self.calibrated)
        modelled.comm_time_s = time.perf_counter() - start
        self._record(modelled)

    def _settle_links(self, account, message: Message, arrived: dict, same_payload: bool, start: float,
                      faulted: bool = False) -> None:
        """``_settle`` for a round on the links (a gossip or an exchange), noting each incoming link's arrival."""
        links = self.plan.local.links
        model = link_arrivals(self.network, links, 8.0 * math.ceil(message.wire_bits / 8), same_payload)
        for e, (_, seconds) in arrived.items():
            entry = self.link_times.setdefault((int(links.src[e]), int(links.dst[e])), [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += seconds
            entry[2] += float(model[e])
        modelled = account(self.network, links, message)
        if faulted:  # what was lost or late, and nothing for what was never sent
            modelled = self._faulted(modelled, links)
        self._settle(modelled, lambda net: account(net, links, message).comm_time_s, start)

    # -- encoding: the message says which operator made it and over which segments ----------
    @staticmethod
    def _codec(message: Message):
        if message.codec is None or message.parts is None:
            raise ValueError("a distributed exchange needs a Message made by Compressor.compress")
        return message.codec, list(message.segments)

    def _encode(self, message: Message) -> list[torch.Tensor]:
        codec, segments = self._codec(message)
        return encode(codec, message, segments)

    def _decode(self, payloads: torch.Tensor, message: Message) -> torch.Tensor:
        codec, segments = self._codec(message)
        return decode(codec, payloads, segments, message.values.dtype, message.values.device)

    def _mix(self, gathered: torch.Tensor) -> torch.Tensor:
        """Our rows of W times ``gathered`` (our rows, then the received ones): a dense product where our block of W
        is tiny (a process holding a worker or a few), which costs a third of the sparse one's call (5 against 15 µs
        at d = 15,210 on a 2-core CPU); a sparse CSR product otherwise."""
        key = (self.phase, gathered.dtype, gathered.device)
        if key not in self._matrices:
            w_local = self.plan.w_local
            self._matrices[key] = (torch.tensor(w_local, dtype=gathered.dtype, device=gathered.device)
                                   if w_local.size <= DENSE_MIX_MAX else csr_like(w_local, gathered))
        matrix = self._matrices[key]
        return torch.sparse.mm(matrix, gathered) if matrix.layout == torch.sparse_csr else torch.mm(matrix, gathered)

    # -- point to point, one message per link ----------------------------------------------------
    def _links_exchange(self, payload_of, size: int, device) -> dict[int, torch.Tensor]:
        """Send ``payload_of(link)`` on every link to another process and receive on every link from one;
        returns the received bytes per link id. Records bytes per link and arrival times per incoming link."""
        return self._links_wait(*self._links_post(payload_of, size, device))

    def _links_post(self, payload_of, size: int, device) -> tuple[list, list, float]:
        """``_links_exchange``'s first half: every receive posted (into a fresh buffer of ``size`` bytes), then every
        send; (receives, sends, start)."""
        plan, links = self.plan, self.plan.local.links
        start = time.perf_counter()
        receives = []
        for p in sorted(plan.recv_from):
            for e in plan.recv_from[p]:
                inbox = torch.empty(size, dtype=torch.uint8, device=device)
                receives.append((int(e), inbox, dist.irecv(inbox, src=p, tag=int(e))))
        sends = []
        for p in sorted(plan.send_to):
            for e in plan.send_to[p]:
                buffer = payload_of(int(e))
                self.bytes_sent += buffer.numel()
                sends.append(dist.isend(buffer, dst=p, tag=int(e)))
        for e in range(plan.local.out.start, plan.local.out.stop):
            key = (int(links.src[e]), int(links.dst[e]))
            self.link_bytes[key] = self.link_bytes.get(key, 0) + size
        return receives, sends, start

    @staticmethod
    def _links_wait(receives: list, sends: list, start: float) -> dict[int, tuple[torch.Tensor, float]]:
        """``_links_exchange``'s second half: each receive's bytes and its arrival, seconds after ``start``."""
        arrived = {}
        for e, inbox, request in receives:
            request.wait()
            arrived[e] = (inbox, time.perf_counter() - start)
        for request in sends:
            request.wait()
        return arrived

    # -- the Communicator interface ------------------------------------------------------
    def gossip(self, message: Message) -> torch.Tensor:
        if self.faults is None:
            return self._gossip_posted(message)(settled_from_post=True)
        start = time.perf_counter()
        values, plan = message.values, self.plan
        links = plan.local.links
        payloads = self._encode(message) if plan.send_to else []
        size = math.ceil(message.wire_bits / 8)
        arrived = self._links_exchange(lambda e: payloads[links.src[e] - self.lo], size, values.device)
        gathered = self._gathered(message, arrived)
        # a round with losses: every message travels and is counted; the receiver drops what was lost and keeps
        # its weight on its own row (D-PSGD's rule, bench/faults/reweight.py), as the simulator does
        delivered = self.faults.delivered(self.round, links)
        pairwise = self.faults.spec.pairwise
        W = reweighted(self.topology.W_at(self.round), links, delivered, pairwise)
        w_local = _Plan.of(W, links, self.lo, self.hi, self.hi - self.lo, delivered, pairwise).w_local
        flat = gathered.reshape(gathered.shape[0], -1)
        mixed = torch.sparse.mm(csr_like(w_local, flat), flat).reshape(values.shape)
        self._settle_links(account_gossip, message, arrived, True, start, faulted=True)
        return mixed

    def post_gossip(self, message: Message):
        """The gossip's messages leave now; the returned call waits for what has not arrived, mixes, and records
        that wait as the round's measured comm time (arrivals still count from the sends)."""
        if self.faults is not None:
            return super().post_gossip(message)
        return self._gossip_posted(message)

    def _gossip_posted(self, message: Message):
        begun = time.perf_counter()
        values, plan = message.values, self.plan
        links = plan.local.links
        size = math.ceil(message.wire_bits / 8)
        payloads = self._encode(message) if plan.send_to else []
        receives, sends, start = self._links_post(lambda e: payloads[links.src[e] - self.lo], size, values.device)

        def finish(settled_from_post: bool = False) -> torch.Tensor:
            waited = time.perf_counter()
            arrived = self._links_wait(receives, sends, start)
            together = self._gathered(message, arrived)
            mixed = self._mix(together.reshape(together.shape[0], -1)).reshape(values.shape)
            self._settle_links(account_gossip, message, arrived, True, begun if settled_from_post else waited)
            return mixed

        return finish

    def _gathered(self, message: Message, arrived: dict) -> torch.Tensor:
        """Our rows, then each received message decoded, in (peer, link) order: the columns of ``plan.w_local``."""
        plan = self.plan
        received = [self._decode(torch.stack([arrived[int(e)][0] for e in plan.recv_from[p]]), message)
                    for p in sorted(plan.recv_from)]
        return torch.cat([message.values, *received]) if received else message.values

    def exchange(self, message: Message) -> torch.Tensor:
        start = time.perf_counter()
        values, plan = message.values, self.plan
        local = plan.local
        out = local.out
        if values.shape[0] != out.stop - out.start:
            raise ValueError(f"an exchange sends one row per outgoing link: {out.stop - out.start} here, "
                             f"got {values.shape[0]}")
        payloads = self._encode(message) if plan.send_to else []
        size = math.ceil(message.wire_bits / 8)
        arrived = self._links_exchange(lambda e: payloads[e - out.start], size, values.device)
        result = torch.empty((len(local.into), *values.shape[1:]), dtype=values.dtype, device=values.device)
        position = {int(e): k for k, e in enumerate(local.into)}
        inside = [e for e in local.into if out.start <= e < out.stop]  # links between two of our workers
        if inside:
            result[[position[int(e)] for e in inside]] = values[[int(e) - out.start for e in inside]]
        if arrived:
            ids = sorted(arrived)
            result[[position[e] for e in ids]] = self._decode(torch.stack([arrived[e][0] for e in ids]), message)
        if self.faults is not None:  # what was lost on the way is not heard (its bytes travelled all the same)
            _, heard = self.delivered()
            result[torch.as_tensor(~heard, device=result.device)] = 0
        self._settle_links(account_exchange, message, arrived, False, start, faulted=self.faults is not None)
        return result

    def _ring(self, chunks: list[torch.Tensor], reduce: bool) -> None:
        """In place over ``chunks`` (one per process): a reduce-scatter ring (each ends holding the sum of chunk
        rank + 1) when ``reduce``, else an all-gather ring (chunk r starts at rank r, or at r − 1 after a
        reduce-scatter)."""
        world, rank = self.world, self.rank
        right, left = (rank + 1) % world, (rank - 1) % world
        shift = 0 if reduce else 1
        for step in range(world - 1):
            send_index, recv_index = (rank - step + shift) % world, (rank - step - 1 + shift) % world
            outgoing = chunks[send_index].contiguous()
            incoming = torch.empty_like(chunks[recv_index])
            self.bytes_sent += outgoing.numel() * outgoing.element_size()
            requests = [dist.isend(outgoing, dst=right), dist.irecv(incoming, src=left)]
            for request in requests:
                request.wait()
            if reduce:
                chunks[recv_index].add_(incoming)
            else:
                chunks[recv_index].copy_(incoming)

    def allreduce_mean(self, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        total = x.sum(dim=0).reshape(-1).clone()
        if self.world > 1:
            chunks = list(torch.tensor_split(total, self.world))
            self._ring(chunks, reduce=True)
            self._ring(chunks, reduce=False)
        mean = (total / self.n).reshape(x.shape[1:]).expand_as(x).clone()
        d = x[0].numel()
        self._settle(account_allreduce(self.network, d, self.n), lambda net: net.allreduce_time(32.0 * d, self.n), start)
        return mean

    def allgather_mean(self, message: Message) -> torch.Tensor:
        start = time.perf_counter()
        values = message.values
        size = math.ceil(message.wire_bits / 8)
        mine = torch.cat(self._encode(message))  # this process's workers' encoded messages, one after another
        blocks = [torch.empty_like(mine) for _ in range(self.world)]
        blocks[self.rank].copy_(mine)
        # an all-gather ring: at step s, rank r forwards block r − s to r + 1
        world, rank = self.world, self.rank
        for step in range(world - 1):
            send_index, recv_index = (rank - step) % world, (rank - step - 1) % world
            self.bytes_sent += blocks[send_index].numel()
            requests = [dist.isend(blocks[send_index], dst=(rank + 1) % world),
                        dist.irecv(blocks[recv_index], src=(rank - 1) % world)]
            for request in requests:
                request.wait()
        decoded = self._decode(torch.cat(blocks).view(self.n, size), message)  # [n, d], every worker's message
        mean = decoded.mean(dim=0, keepdim=True).expand_as(values).clone()
        self._settle(account_allgather(self.network, message, self.n), lambda net: net.allgather_time(8.0 * size, self.n),
                     start)
        return mean

    def global_mean(self, x: torch.Tensor) -> torch.Tensor:
        total = x.sum(dim=0)
        if total.numel() <= STAR_MAX and self.world > 1:
            self._star_sum(total)
        else:
            dist.all_reduce(total)
        return total / self.n

    def _star_sum(self, total: torch.Tensor) -> None:
        """``total`` summed over the processes, in place and the same bits on every one: each process sends its
        part to process 0, which adds them in rank order and sends the sum back. Two messages a process, where
        gloo's ring all-reduce takes 2·(P − 1) hops one after another: for the few numbers of a read of the
        losses or a flag, on a machine with fewer cores than ranks, each hop is a context switch
        (docs/performance.md, h)."""
        if self.rank == 0:
            parts = [torch.empty_like(total) for _ in range(1, self.world)]
            for request in [dist.irecv(part, src=r, tag=STAR_TAG) for r, part in enumerate(parts, 1)]:
                request.wait()
            for part in parts:
                total.add_(part)
            for request in [dist.isend(total, dst=r, tag=STAR_TAG) for r in range(1, self.world)]:
                request.wait()
        else:
            dist.isend(total, dst=0, tag=STAR_TAG).wait()
            dist.irecv(total, src=0, tag=STAR_TAG).wait()
