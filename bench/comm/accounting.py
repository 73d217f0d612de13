"""What a message costs on the links: the per-link bit count and the α–β model's time, one owner for both
runtimes (the distributed one also counts the bytes it hands to torch.distributed; its tests compare the two).

A worker's count is what it puts on its links: a gossip to k out-neighbours is k copies of its message (one on
a broadcast medium), an edge exchange one message per link, a ring collective what it sends on its ring link.
A copy occupies its encoding framed in whole bytes.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..compressors import Message
from ..topology.links import Links
from .traffic import Traffic
from .netmodel import NetworkModel


def link_bits(message: Message) -> float:
    """What one copy of ``message`` occupies on a link: its encoding framed in whole bytes, as it is sent."""
    return 8.0 * math.ceil(message.wire_bits / 8)


def ring_allreduce_elements(d: int, n: int) -> np.ndarray:
    """[n] entries each worker sends in a ring all-reduce of a d-entry vector cut in n chunks (torch.tensor_split's
    sizes): reduce-scatter, then all-gather; worker r never sends chunk r + 1 in the first and r + 2 in the second."""
    if n <= 1:
        return np.zeros(max(n, 1))
    r = np.arange(n)
    whole, extra = divmod(int(d), n)
    chunks = (whole + (r < extra)).astype(np.float64)  # tensor_split gives the first d mod n chunks one more
    return 2.0 * d - chunks[(r + 1) % n] - chunks[(r + 2) % n]


@lru_cache(maxsize=4096)
def link_arrivals(network: NetworkModel, links: Links, bits: float, same_payload: bool) -> np.ndarray:
    """The model's arrival time on each link of a round in which every link carries ``bits`` (read-only; a run
    repeats a few such rounds, so each is worked out once)."""
    arrivals = network.link_arrivals(links.src, np.full(links.E, bits), same_payload)
    arrivals.setflags(write=False)
    return arrivals


def _round_time(network: NetworkModel, links: Links, bits: float, same_payload: bool) -> float:
    """A synchronous round: until its last message has arrived (0 without links)."""
    arrivals = link_arrivals(network, links, bits, same_payload)
    return float(arrivals.max()) if arrivals.size else 0.0


def account_gossip(network: NetworkModel, links: Links, message: Message) -> Traffic:
    """One message per worker to each of its out-neighbours: a copy per link, or one transmission on a
    broadcast medium (a worker without links this round sends nothing)."""
    worker_bits, mean, time_s = _gossip_cost(network, links, link_bits(message))
    return Traffic(mean, message.paper_bits, time_s, 1, worker_bits, links.E)


@lru_cache(maxsize=4096)
def _gossip_cost(network: NetworkModel, links: Links, bits: float) -> tuple[np.ndarray, float, float]:
    """A gossip round's bits per worker (read-only), their mean and the round's time: a run repeats a few such
    rounds (the sizes do not depend on the data), so each is worked out once."""
    degree = links.out_degree
    copies = (degree > 0).astype(np.float64) if network.broadcast else degree.astype(np.float64)
    worker_bits = copies * bits
    worker_bits.setflags(write=False)
    return worker_bits, float(worker_bits.mean()), _round_time(network, links, bits, True)


def account_exchange(network: NetworkModel, links: Links, message: Message) -> Traffic:
    """A different message on every link: each one its own transmission; the paper's accounting counts each
    distinct message's payload once."""
    bits = link_bits(message)
    degree = links.out_degree.astype(np.float64)
    time_s = _round_time(network, links, bits, False)
    return Traffic.sent(degree * bits, float(degree.mean()) * message.paper_bits, time_s, link_messages=links.E)


def account_allreduce(network: NetworkModel, d: int, n: int) -> Traffic:
    """A ring all-reduce of a float32 vector of d entries: what each worker sends on its ring link."""
    bits = 32.0 * d
    return Traffic.sent(32.0 * ring_allreduce_elements(d, n), bits, network.allreduce_time(bits, n))


def account_allgather(network: NetworkModel, message: Message, n: int) -> Traffic:
    """A ring all-gather of one encoded message per worker: each forwards n − 1 messages on its ring link."""
    bits = link_bits(message)
    return Traffic.sent(np.full(n, (n - 1) * bits), message.paper_bits, network.allgather_time(bits, n))


def unsent(traffic: Traffic, links: Links, idle: np.ndarray, broadcast: bool = False) -> Traffic:
    """``traffic`` of a round on the links less what was never put on the links marked ``idle`` (a sender that
    sat the round out; under pairwise gossip every link but the round's edge): their copies' bits and their
    messages, counted neither as sent nor as lost. Messages sent *to* a worker away are sent and lost."""
    idle = np.asarray(idle, dtype=bool)
    if not idle.any():
        return traffic
    n = traffic.worker_bits.shape[0]
    sent = np.bincount(links.src[~idle], minlength=n)  # the copies each worker still sends
    degree = np.maximum(links.out_degree, 1)
    worker_bits = traffic.worker_bits * ((sent > 0) if broadcast else sent / degree)
    traffic.worker_bits, traffic.wire_bits = worker_bits, float(worker_bits.mean())
    traffic.link_messages -= int(idle.sum())
    traffic.link_lost -= int(idle.sum())
    return traffic
