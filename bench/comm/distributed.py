"""torch.distributed runtime: each process holds a contiguous block of workers (rows lo..hi-1).

A gossip round sends the real encoded payload of each local worker, point to point, once to
every other process that holds one of its graph neighbours (gloo on CPU, NCCL on GPU), decodes
what arrives and mixes with the rows of W it needs. Time is measured, not modelled; the α–β
model's prediction is kept beside it. A time-varying topology has one such plan per round of its
period; ``round`` (advanced by ``drain``, which ends every algorithm's step) picks it.
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
from .base import Communicator, Traffic
from .mixing import csr_like
from .netmodel import NetworkModel, make_network


def block_of(n: int, world: int, rank: int) -> tuple[int, int]:
    if n % world:
        raise BenchError(f"nodes={n} must be a multiple of the number of processes ({world})")
    k = n // world
    return rank * k, (rank + 1) * k


@dataclass(frozen=True)
class _Plan:
    """One W's exchange for this process: per peer process, which of our workers it needs
    (``send_to``) and which of its workers we need (``recv_from``), and our rows of W over the
    columns we then hold (ours first, then the received rows in (peer, worker) order)."""

    send_to: dict[int, list[int]]
    recv_from: dict[int, list[int]]
    w_local: np.ndarray

    @classmethod
    def of(cls, W: np.ndarray, rank: int, world: int, lo: int, hi: int, k: int) -> "_Plan":
        local = range(lo, hi)
        send_to: dict[int, list[int]] = {}
        recv_from: dict[int, list[int]] = {}
        for p in range(world):
            if p == rank:
                continue
            theirs = range(p * k, (p + 1) * k)
            send = [j for j in local if any(W[i, j] > 0 for i in theirs)]
            recv = [j for j in theirs if any(W[i, j] > 0 for i in local)]
            if send:
                send_to[p] = send
            if recv:
                recv_from[p] = recv
        owner = np.arange(W.shape[0]) // k
        assert all(owner[j] == p for p, js in recv_from.items() for j in js)
        columns = list(local) + [j for p in sorted(recv_from) for j in recv_from[p]]
        return cls(send_to, recv_from, np.ascontiguousarray(W[lo:hi][:, columns]))


class DistributedCommunicator(Communicator):
    def __init__(self, topology: Topology, compressor: Compressor, segments: list[int] | None,
                 network: NetworkModel | None = None):
        super().__init__()
        self.topology, self.compressor, self.segments = topology, compressor, segments
        self.network = network or make_network()
        self.n = topology.n
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.lo, self.hi = block_of(self.n, self.world, self.rank)
        k = self.hi - self.lo
        # who sends what to whom, per phase of the period (a static graph has one phase); round t uses
        # phase t mod period, and drain() ends a round (every algorithm's step ends with it)
        self._plans = [_Plan.of(topology.W_at(phase), self.rank, self.world, self.lo, self.hi, k)
                       for phase in range(topology.period)]
        self.round = 0
        self._csr: dict[tuple, torch.Tensor] = {}
        self.bytes_sent = 0
        self.predicted_comm_s = 0.0  # the α–β model of the run's network preset
        self.calibrated: NetworkModel | None = None  # fitted by ping-pong on this backend, if asked
        self.predicted_calibrated_s = 0.0

    # -- this round's exchange ---------------------------------------------------------------
    @property
    def phase(self) -> int:
        return self.round % len(self._plans)

    @property
    def send_to(self) -> dict[int, list[int]]:
        return self._plans[self.phase].send_to

    @property
    def recv_from(self) -> dict[int, list[int]]:
        return self._plans[self.phase].recv_from

    def drain(self) -> Traffic:
        done = super().drain()
        self.round += 1
        return done

    def describe_runtime(self, rounds: int) -> dict:
        rounds = max(rounds, 1)
        return {"predicted_comm_s": self.predicted_comm_s, "predicted_comm_per_round_s": self.predicted_comm_s / rounds,
                "calibration": self.calibrated.describe() if self.calibrated is not None else None,
                "predicted_calibrated_comm_per_round_s": self.predicted_calibrated_s / rounds,
                "bytes_sent_rank0": self.bytes_sent}

    def _predict(self, cost) -> None:
        self.predicted_comm_s += cost(self.network)
        if self.calibrated is not None:
            self.predicted_calibrated_s += cost(self.calibrated)

    # -- encoding: the message says which operator made it and over which segments ----------
    @staticmethod
    def _codec(message: Message):
        if message.codec is None or message.parts is None:
            raise ValueError("a distributed gossip needs a Message made by Compressor.compress")
        return message.codec, list(message.segments)

    def _encode(self, message: Message) -> list[torch.Tensor]:
        codec, segments = self._codec(message)
        return encode(codec, message, segments)

    def _decode(self, payloads: torch.Tensor, message: Message) -> torch.Tensor:
        codec, segments = self._codec(message)
        return decode(codec, payloads, segments, message.values.dtype, message.values.device)

    def _mix(self, gathered: torch.Tensor) -> torch.Tensor:
        key = (self.phase, gathered.dtype, gathered.device)
        if key not in self._csr:
            self._csr[key] = csr_like(self._plans[self.phase].w_local, gathered)
        return torch.sparse.mm(self._csr[key], gathered)

    # -- the Communicator interface ------------------------------------------------------
    def gossip(self, message: Message) -> torch.Tensor:
        start = time.perf_counter()
        values = message.values
        send_to, recv_from = self.send_to, self.recv_from
        payloads = self._encode(message) if send_to else []
        size = math.ceil(message.wire_bits / 8)
        requests, inboxes = [], {}
        for p, workers in sorted(recv_from.items()):
            inboxes[p] = torch.empty(len(workers) * size, dtype=torch.uint8, device=values.device)
            requests.append(dist.irecv(inboxes[p], src=p))
        for p, workers in sorted(send_to.items()):
            buffer = torch.cat([payloads[j - self.lo] for j in workers])
            self.bytes_sent += buffer.numel()
            requests.append(dist.isend(buffer, dst=p))
        for request in requests:
            request.wait()
        received = [self._decode(inboxes[p].view(len(recv_from[p]), size), message) for p in sorted(inboxes)]
        gathered = torch.cat([values, *received]) if received else values
        mixed = self._mix(gathered.reshape(gathered.shape[0], -1)).reshape(values.shape)
        elapsed = time.perf_counter() - start
        self._predict(lambda net: net.gossip_time(message.wire_bits, self.topology.max_degree))
        self._record(Traffic(message.wire_bits, message.paper_bits, elapsed, 1))
        return mixed

    def allreduce_mean(self, x: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        total = x.sum(dim=0)
        dist.all_reduce(total)
        mean = (total / self.n).expand_as(x).clone()
        bits = 32.0 * x[0].numel()
        self._predict(lambda net: net.allreduce_time(bits, self.n))
        self._record(Traffic(2.0 * (self.n - 1) / self.n * bits, bits, time.perf_counter() - start, 1))
        return mean

    def allgather_mean(self, message: Message) -> torch.Tensor:
        start = time.perf_counter()
        values = message.values
        size = math.ceil(message.wire_bits / 8)
        mine = torch.cat(self._encode(message))  # this process's workers' encoded messages, one after another
        blocks = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(blocks, mine)
        self.bytes_sent += (self.world - 1) * mine.numel()  # a ring all-gather forwards every other block once
        decoded = self._decode(torch.cat(blocks).view(self.n, size), message)  # [n, d], every worker's message
        mean = decoded.mean(dim=0, keepdim=True).expand_as(values).clone()
        bits = message.wire_bits
        self._predict(lambda net: net.allgather_time(bits, self.n))
        self._record(Traffic((self.n - 1) * bits, message.paper_bits, time.perf_counter() - start, 1))
        return mean

    def global_mean(self, x: torch.Tensor) -> torch.Tensor:
        total = x.sum(dim=0)
        dist.all_reduce(total)
        return total / self.n
