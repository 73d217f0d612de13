"""The α–β network cost model that gives simulated runs a communication time.

A worker sending ``b`` bits to each of its ``deg`` neighbours over one NIC pays
``deg·(α + b/B)``; a synchronous round lasts as long as its slowest worker. A ring
all-reduce of ``M`` bits costs ``2(n−1)·(α + M/(n·B))``; a ring all-gather of one ``b``-bit message
per worker (compressed messages cannot be summed on the way) costs ``(n−1)·(α + b/B)``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import BenchError
from ..specs import parse_spec


@dataclass(frozen=True)
class NetworkModel:
    name: str
    latency_s: float  # α: per-message start-up cost, seconds
    bandwidth_bps: float  # B: link bandwidth, bits per second

    def gossip_time(self, bits: float, max_degree: int) -> float:
        """Round time when every worker sends a ``bits``-bit message to each neighbour."""
        return max_degree * (self.latency_s + bits / self.bandwidth_bps)

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
        return {"name": self.name, "latency_s": self.latency_s, "bandwidth_bps": self.bandwidth_bps}


# Orders of magnitude, not measurements of a particular cluster: override them with
# ``preset,latency=...,bandwidth=...`` (or calibrate with the distributed runtime).
NETWORK_PRESETS: dict[str, NetworkModel] = {
    "datacenter-100g": NetworkModel("datacenter-100g", latency_s=2e-6, bandwidth_bps=100e9),
    "datacenter-10g": NetworkModel("datacenter-10g", latency_s=10e-6, bandwidth_bps=10e9),
    "p2p-100m": NetworkModel("p2p-100m", latency_s=5e-3, bandwidth_bps=100e6),
    "edge-10m": NetworkModel("edge-10m", latency_s=20e-3, bandwidth_bps=10e6),
}


def make_network(spec: str = "datacenter-10g") -> NetworkModel:
    """``preset[,latency=SECONDS][,bandwidth=BITS_PER_S]``."""
    parsed = parse_spec(spec)
    if parsed.name not in NETWORK_PRESETS:
        raise BenchError(f"unknown network preset {parsed.name!r}; known: {', '.join(NETWORK_PRESETS)}")
    if parsed.arg is not None:
        raise BenchError(f"network preset {spec!r} takes options (latency=, bandwidth=), not ':{parsed.arg}'")
    parsed.check_options({"latency", "bandwidth"})
    model = NETWORK_PRESETS[parsed.name]
    changes = {}
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
