"""All n workers in one process, stacked on dimension 0; time from the α–β network model, per link."""
from __future__ import annotations

import torch

from ..compressors import Message
from ..topology import Topology
from .accounting import account_allgather, account_allreduce, account_exchange, account_gossip
from .base import Communicator, LocalLinks, Traffic
from .mixing import Mixer
from .netmodel import NetworkModel, make_network


class SimulatedCommunicator(Communicator):
    """``round`` is the step being run: every algorithm's step ends with ``drain()``, which advances it, so
    all gossips of one step (an algorithm may gossip two vectors a step) mix with the same W_round of a
    time-varying topology. A resumed run sets it to the step it resumes at."""

    def __init__(self, topology: Topology, network: NetworkModel | None = None, faults=None):
        super().__init__()
        self.topology = topology
        self.faults = faults  # a bench.faults.FaultSchedule, or None: every message arrives
        self.n = topology.n
        self.network = network or make_network()
        self.round = 0
        # one Mixer per phase of the period (a static graph has one): W_k of the one-peer graph is a circulant
        # with two shifts, so it mixes by shifted adds
        self._mixers = [Mixer(topology.W_at(k), topology.grid_shape) for k in range(topology.period)]
        self._links = [LocalLinks.of(topology.links_at(k), 0, self.n) for k in range(topology.period)]

    @property
    def mixer(self) -> Mixer:
        """The Mixer of this round's W."""
        return self._mixers[self.round % len(self._mixers)]

    def links(self) -> LocalLinks:
        return self._links[self.round % len(self._links)]

    def drain(self) -> Traffic:
        done = super().drain()
        self.round += 1
        return done

    def gossip(self, message: Message) -> torch.Tensor:
        if self.faults is not None:
            return self._lossy_gossip(message)
        self._account_gossip(message)
        return self.mixer(message.values)

    def gossip_into(self, message: Message, out: torch.Tensor, self_shift: float = 0.0) -> torch.Tensor:
        if self.faults is not None:
            out.add_(self._lossy_gossip(message))
            return out.add_(message.values, alpha=self_shift) if self_shift else out
        self._account_gossip(message)
        return self.mixer.accumulate(out, message.values, self_shift)

    def _lossy_gossip(self, message: Message) -> torch.Tensor:
        """A gossip of a round with losses (bench/faults): every message is sent and counted, each receiver
        averages what arrived and keeps the weight of what did not on its own row (D-PSGD's rule; the
        algorithms whose state a lost message would split are refused before a run starts)."""
        from ..faults import reweighted

        links = self.links().links
        delivered = self.faults.delivered(self.round, links)
        self._record(self._faulted(account_gossip(self.network, links, message), links))
        W = torch.as_tensor(reweighted(self.topology.W_at(self.round), links, delivered, self.faults.spec.pairwise),
                            dtype=message.values.dtype, device=message.values.device)
        return W @ message.values

    def exchange(self, message: Message) -> torch.Tensor:
        links = self.links().links
        if message.values.shape[0] != links.E:
            raise ValueError(f"an exchange sends one row per link: {links.E} this round, got {message.values.shape[0]}")
        traffic = account_exchange(self.network, links, message)
        if self.faults is None:
            self._record(traffic)
            return message.values  # every link delivers what was sent on it
        _, arrived = self.delivered()
        self._record(self._faulted(traffic, links))
        keep = torch.as_tensor(arrived, device=message.values.device).reshape(-1, *[1] * (message.values.dim() - 1))
        return torch.where(keep, message.values, torch.zeros((), dtype=message.values.dtype,
                                                             device=message.values.device))

    def _account_gossip(self, message: Message) -> None:
        self._record(account_gossip(self.network, self.links().links, message))

    def allreduce_mean(self, x: torch.Tensor) -> torch.Tensor:
        self._record(account_allreduce(self.network, x[0].numel(), self.n))
        return x.mean(dim=0, keepdim=True).expand_as(x).clone()

    def allgather_mean(self, message: Message) -> torch.Tensor:
        self._record(account_allgather(self.network, message, self.n))
        values = message.values
        return values.mean(dim=0, keepdim=True).expand_as(values).clone()

    def global_mean(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=0)
