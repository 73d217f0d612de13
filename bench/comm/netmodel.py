"""The α–β network cost model that gives simulated runs a communication time, priced per link.

Every message travels on its own directed link (full duplex) and costs ``α + b/B`` there. A worker's round
ends when the last message sent to it has arrived; a synchronous round lasts until the last worker's has.
``sends`` says how a worker puts its k messages on its links: ``serial`` (the default: one NIC, one message
after another in receiver order, so the m-th arrives at ``m·(α + b/B)`` and a gossip of ``b`` bits to ``deg``
neighbours costs ``deg·(α + b/B)``) or ``parallel`` (each link has its own line: every message arrives at
``α + b/B``). ``medium=broadcast`` is a shared medium (wireless): one transmission of a gossip message
reaches every neighbour, so it is sent and counted once; messages that differ per link (an edge exchange)
are still one transmission each, and collectives are refused there. A ring all-reduce of ``M`` bits costs
``2(n−1)·(α + M/(n·B))``; a ring all-gather of one ``b``-bit message per worker (compressed messages cannot
be summed on the way) costs ``(n−1)·(α + b/B)``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import BenchError
from ..specs import number, parse_spec, spell


@dataclass(frozen=True)
class NetworkModel:
    name: str
    latency_s: float  # α: per-message start-up cost, seconds
    bandwidth_bps: float  # B: link bandwidth, bits per second
    medium: str = "links"  # links: one transmission per link; broadcast: one gossip transmission reaches all
    sends: str = "serial"  # serial: a worker sends its messages one after another; parallel: all at once

    @property
    def broadcast(self) -> bool:
        return self.medium == "broadcast"

    def link_arrivals(self, src: np.ndarray, bits: np.ndarray, same_payload: bool = False) -> np.ndarray:
        """When each link's message arrives after the round starts; links sorted by sender (``src``), ``bits``
        per link. ``same_payload``: every link of a sender carries one message (a gossip), which a broadcast
        medium sends once."""
        src = np.asarray(src)
        cost = self.latency_s + np.asarray(bits, dtype=np.float64) / self.bandwidth_bps
        cost = np.broadcast_to(cost, src.shape).astype(np.float64)
        if (same_payload and self.broadcast) or self.sends == "parallel" or cost.size == 0:
            return cost
        # serial: the running sum of the costs within each sender's (contiguous) group of links
        total = np.cumsum(cost)
        starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]])
        before = np.repeat(np.r_[0.0, total[starts[1:] - 1]], np.diff(np.r_[starts, src.size]))
        return total - before

    def exchange_time(self, src: np.ndarray, bits: np.ndarray, same_payload: bool = False) -> float:
        """A synchronous round: until the last message of the round has arrived (0 without links)."""
        arrivals = self.link_arrivals(src, bits, same_payload)
        return float(arrivals.max()) if arrivals.size else 0.0

    def allreduce_time(self, bits: float, n: int) -> float:
        """Ring all-reduce of a ``bits``-bit vector across ``n`` workers."""
        if n <= 1:
            return 0.0
        return 2 * (n - 1) * (self.latency_s + bits / (n * self.bandwidth_bps))

    def allgather_time(self, bits: float, n: int) -> float:
        """Ring all-gather of one ``bits``-bit message per worker: n − 1 steps, each forwarding one message."""
        if n <= 1:
            return 0.0
        return (n - 1) * (self.latency_s + bits / self.bandwidth_bps)

    def describe(self) -> dict:
        return {"name": self.name, "latency_s": self.latency_s, "bandwidth_bps": self.bandwidth_bps,
                "medium": self.medium, "sends": self.sends}


# Orders of magnitude, not measurements of a particular cluster: override them with
# ``preset,latency=...,bandwidth=...`` (or calibrate with the distributed runtime).
NETWORK_PRESETS: dict[str, NetworkModel] = {
    "datacenter-100g": NetworkModel("datacenter-100g", latency_s=2e-6, bandwidth_bps=100e9),
    "datacenter-10g": NetworkModel("datacenter-10g", latency_s=10e-6, bandwidth_bps=10e9),
    "p2p-100m": NetworkModel("p2p-100m", latency_s=5e-3, bandwidth_bps=100e6),
    "edge-10m": NetworkModel("edge-10m", latency_s=20e-3, bandwidth_bps=10e6),
}


CHOICES = {"medium": ("links", "broadcast"), "sends": ("serial", "parallel")}


def make_network(spec: str = "datacenter-10g") -> NetworkModel:
    """``preset[,latency=SECONDS][,bandwidth=BITS_PER_S][,medium=links|broadcast][,sends=serial|parallel]``."""
    parsed = parse_spec(spec)
    if parsed.name not in NETWORK_PRESETS:
        raise BenchError(f"unknown network preset {parsed.name!r}; known: {', '.join(NETWORK_PRESETS)}")
    if parsed.arg is not None:
        raise BenchError(f"network preset {spec!r} takes options (latency=, bandwidth=, medium=, sends=), "
                         f"not ':{parsed.arg}'")
    parsed.check_options({"latency", "bandwidth", *CHOICES})
    model = NETWORK_PRESETS[parsed.name]
    changes = {}
    for key, allowed in CHOICES.items():
        if key in parsed.options:
            if parsed.options[key] not in allowed:
                raise BenchError(f"{key}={parsed.options[key]!r} in network {spec!r}; allowed: {', '.join(allowed)}")
            changes[key] = parsed.options[key]
    for key, field_name in (("latency", "latency_s"), ("bandwidth", "bandwidth_bps")):
        if key in parsed.options:
            try:
                value = float(parsed.options[key])
            except ValueError:
                raise BenchError(f"{key}={parsed.options[key]!r} in {spec!r} is not a number") from None
            if not value > 0 and not (key == "latency" and value == 0):
                raise BenchError(f"{key}={value} in {spec!r} must be positive")
            changes[field_name] = value
    if changes:
        model = replace(model, name=parsed.text, **changes)
    return model


def canonical(spec: str) -> str:
    """The one spelling of the network ``spec`` names: its options in make_network's order, numbers spelt once
    (latency=1e-3 and latency=0.0010 are latency=0.001), less those that leave the preset as it is. A spec that
    does not parse is returned as it is, for make_network to refuse in its own words."""
    try:
        model = make_network(spec)
    except BenchError:
        return spec
    parsed = parse_spec(spec)
    preset = NETWORK_PRESETS[parsed.name]
    options = {}
    for key, field_name in (("latency", "latency_s"), ("bandwidth", "bandwidth_bps"), ("medium", "medium"),
                            ("sends", "sends")):
        value = getattr(model, field_name)
        if key in parsed.options and value != getattr(preset, field_name):
            options[key] = number(value) if isinstance(value, float) else value
    return spell(parsed.name, None, options)
