"""All n workers in one process, stacked on dimension 0; time from the α–β network model."""
from __future__ import annotations

import torch

from ..compressors import Message
from ..topology import Topology
from .base import Communicator, Traffic
from .mixing import Mixer
from .netmodel import NetworkModel, make_network


class SimulatedCommunicator(Communicator):
    """``round`` is the step being run: every algorithm's step ends with ``drain()``, which advances it, so
    all gossips of one step (an algorithm may gossip two vectors a step) mix with the same W_round of a
    time-varying topology. A resumed run sets it to the step it resumes at."""

    def __init__(self, topology: Topology, network: NetworkModel | None = None):
        super().__init__()
        self.topology = topology
        self.n = topology.n
        self.network = network or make_network()
        self.round = 0
        # one Mixer per phase of the period (a static graph has one): W_k of the one-peer graph is a circulant
        # with two shifts, so it mixes by shifted adds
        self._mixers = [Mixer(topology.W_at(k), topology.grid_shape) for k in range(topology.period)]

    @property
    def mixer(self) -> Mixer:
        """The Mixer of this round's W."""
        return self._mixers[self.round % len(self._mixers)]

    def drain(self) -> Traffic:
        done = super().drain()
        self.round += 1
        return done

    def gossip(self, message: Message) -> torch.Tensor:
        self._account(message)
        return self.mixer(message.values)

    def gossip_into(self, message: Message, out: torch.Tensor, self_shift: float = 0.0) -> torch.Tensor:
        self._account(message)
        return self.mixer.accumulate(out, message.values, self_shift)

    def _account(self, message: Message) -> None:
        time_s = self.network.gossip_time(message.wire_bits, self.topology.max_degree)
        self._record(Traffic(message.wire_bits, message.paper_bits, time_s, 1))

    def allreduce_mean(self, x: torch.Tensor) -> torch.Tensor:
        d = x[0].numel()
        bits = 32.0 * d
        # a ring all-reduce makes every worker send 2(n−1)/n of the vector
        wire = 2.0 * (self.n - 1) / self.n * bits
        self._record(Traffic(wire, bits, self.network.allreduce_time(bits, self.n), 1))
        return x.mean(dim=0, keepdim=True).expand_as(x).clone()

    def allgather_mean(self, message: Message) -> torch.Tensor:
        bits = message.wire_bits
        self._record(Traffic((self.n - 1) * bits, message.paper_bits, self.network.allgather_time(bits, self.n), 1))
        values = message.values
        return values.mean(dim=0, keepdim=True).expand_as(values).clone()

    def global_mean(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=0)
