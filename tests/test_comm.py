"""The simulated communicator: structured gossip equals W @ x, accounting, the network model."""
import math

import numpy as np
import pytest
import torch

from bench.comm import NETWORK_PRESETS, Mixer, SimulatedCommunicator, make_network
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import TOPOLOGIES, make_topology

CASES = [
    ("ring", 3, "mean"), ("ring", 16, "circulant"), ("exponential", 16, "circulant"),
    ("complete", 7, "mean"), ("torus", 12, "torus"), ("torus", 36, "torus"), ("star", 6, "sparse"),
    ("social", 32, "sparse"), ("erdos-renyi:0.3", 20, "sparse"), ("random-regular:3", 10, None),
    ("one-peer-exp", 16, "circulant"),  # each round's W_t: half self, half the peer 2^t along
]


@pytest.mark.parametrize("spec,n,method", CASES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_structured_gossip_equals_dense_product_and_accumulates_it_in_place(spec, n, method, dtype):
    """mixer(x) = W x and accumulate(out, x, s) adds (W + s·I) x into out, in place, whatever the structure used,
    extra dimensions included; x is left alone. Every round of a time-varying graph."""
    topo = make_topology(spec, n)
    gen = torch.Generator().manual_seed(n)
    x, out = (torch.randn(n, 3, 11, generator=gen, dtype=dtype) for _ in range(2))
    before = x.clone()
    tol = 1e-13 if dtype == torch.float64 else 1e-5

    def times_x(matrix):  # the dense product in float64
        return (matrix @ x.double().reshape(n, -1)).reshape(x.shape)

    for t in range(topo.period):
        mixer, W = Mixer(topo.W_at(t), topo.grid_shape), torch.tensor(topo.W_at(t), dtype=torch.float64)
        assert method is None or mixer.method == method
        torch.testing.assert_close(mixer(x).double(), times_x(W), rtol=0, atol=tol)
        assert mixer(x).dtype == dtype and torch.equal(x, before)
        for shift in (0.0, -1.0):
            expected = out.double() + times_x(W + shift * torch.eye(n, dtype=torch.float64))
            assert mixer.accumulate(out, x, self_shift=shift).data_ptr() == out.data_ptr()
            torch.testing.assert_close(out.double(), expected, rtol=0, atol=tol * 10)


def test_gossip_accounts_bits_and_model_time_then_drains():
    topo = make_topology("ring", 8)
    net = make_network("datacenter-10g")
    comm = SimulatedCommunicator(topo, net)
    comp = make_compressor("sign")
    x = torch.randn(8, 100)
    comm.gossip(comp.compress(x))
    comm.gossip(comp.compress(x))
    traffic = comm.drain()
    bits = comp.wire_bits([100])
    assert bits == 132 and traffic.messages == 2  # 100 signs and one float32 scale, sent as 17 bytes
    assert traffic.wire_bits == 2 * 2 * 136  # two messages, each to both neighbours
    assert traffic.paper_bits == 2 * comp.paper_bits([100])
    assert traffic.comm_time_s == pytest.approx(2 * 2 * (net.latency_s + 136 / net.bandwidth_bps))
    assert comm.drain().messages == 0


def test_network_presets_and_overrides():
    assert set(NETWORK_PRESETS) >= {"datacenter-10g", "datacenter-100g", "p2p-100m", "edge-10m"}
    custom = make_network("p2p-100m,latency=0.001,bandwidth=5e6")
    assert custom.latency_s == 0.001 and custom.bandwidth_bps == 5e6
    # slower links make the same round strictly slower
    src = np.array([0, 0, 1, 1])
    assert make_network("edge-10m").exchange_time(src, 1e6) > make_network("datacenter-100g").exchange_time(src, 1e6)
    assert make_network("edge-10m,medium=broadcast,sends=parallel").describe()["medium"] == "broadcast"
    for bad, word in [("infiniband", "infiniband"), ("p2p-100m,bandwidth=-1", "bandwidth"),
                      ("p2p-100m,speed=3", "speed"), ("edge-10m,latency=abc", "latency"),
                      ("edge-10m,medium=radio", "medium"), ("edge-10m,sends=some", "sends")]:
        with pytest.raises(BenchError, match=word):
            make_network(bad)
    assert make_network().allreduce_time(1e6, 1) == 0.0  # a single worker's all-reduce is free
    assert np.isclose(make_network().allreduce_time(0, 2), 2 * make_network().latency_s)


# -- what a worker puts on its links ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, n", [(e.spec, e.n) for name in TOPOLOGIES.names() for e in TOPOLOGIES.get(name).examples
                                     if not TOPOLOGIES.get(name).external])
def test_every_worker_sends_a_gossip_on_each_of_its_links_of_the_round(spec, n):
    """Every registered example, over rounds: a worker's bits are one copy of the message per worker that round's W
    has it send to (its own degree on an irregular graph such as the social one; one peer on the one-peer graph,
    whose links change every round), the mean over workers the wire bits. Hand counts on the ring and the one-peer
    graph for every method: test_laws.py's traffic test."""
    topo = make_topology(spec, n)
    comm = SimulatedCommunicator(topo)
    for t in range(3):
        receivers = (topo.W_at(t) > 0) & ~np.eye(n, dtype=bool)  # W[j, i] > 0: i's values reach j
        degrees = np.bincount(topo.links_at(t).src, minlength=n)
        assert degrees.tolist() == receivers.sum(axis=0).tolist()
        comm.gossip(make_compressor("none").compress(torch.randn(n, 4)))  # 128 bits
        traffic = comm.drain()
        assert traffic.worker_bits.tolist() == [128.0 * k for k in degrees]
        assert traffic.wire_bits == pytest.approx(128.0 * degrees.mean()) and traffic.paper_bits == 128.0
        assert traffic.wire_bits_max == 128.0 * max(degrees)


def test_a_broadcast_medium_sends_a_gossip_once_and_prices_one_transmission():
    net = make_network("p2p-100m,medium=broadcast")
    comm = SimulatedCommunicator(make_topology("star", 6), net)
    comm.gossip(make_compressor("none").compress(torch.randn(6, 10)))
    traffic = comm.drain()
    assert traffic.worker_bits.tolist() == [320.0] * 6 and traffic.paper_bits == 320.0
    assert traffic.comm_time_s == pytest.approx(net.latency_s + 320 / net.bandwidth_bps)


@pytest.mark.parametrize("sends,factor", [("serial", 5), ("parallel", 1)])
def test_a_round_ends_when_the_last_message_has_arrived(sends, factor):
    """The star's hub sends 5 messages: one after another they arrive at 1·c … 5·c, on 5 lines at once all at c."""
    net = make_network(f"p2p-100m,sends={sends}")
    links = make_topology("star", 6).links_at(0)
    cost = net.latency_s + 320 / net.bandwidth_bps
    arrivals = net.link_arrivals(links.src, np.full(links.E, 320.0))
    hub = links.src == 0
    expected = np.arange(1, 6) * cost if sends == "serial" else np.full(5, cost)
    np.testing.assert_allclose(arrivals[hub], expected)
    np.testing.assert_allclose(arrivals[~hub], cost)  # each leaf sends one message
    assert net.exchange_time(links.src, 320.0) == pytest.approx(factor * cost)


def test_an_exchange_sends_each_link_its_own_message_and_counts_it_there():
    topo = make_topology("star", 5)
    comm = SimulatedCommunicator(topo, make_network("edge-10m,medium=broadcast"))
    links = comm.links()
    assert links.links.E == 8 and links.out == slice(0, 8) and list(links.into) == list(range(8))
    values = torch.arange(8 * 3, dtype=torch.float32).reshape(8, 3)
    arrived = comm.exchange(make_compressor("none").compress(values))
    assert torch.equal(arrived, values)
    traffic = comm.drain()
    # different messages: one transmission each even on a shared medium
    assert traffic.worker_bits.tolist() == [4 * 96.0, 96.0, 96.0, 96.0, 96.0]
    assert traffic.paper_bits == pytest.approx(96.0 * 8 / 5)  # each distinct message's payload once
    with pytest.raises(ValueError, match="one row per link"):
        comm.exchange(make_compressor("none").compress(values[:3]))


@pytest.mark.parametrize("n,d", [(4, 12), (5, 12), (6, 50), (8, 3), (2, 7), (1, 9)])
def test_collectives_count_what_each_worker_sends_on_its_ring_link(n, d):
    """An exact mean by a ring all-reduce in n chunks (tensor_split), 2(n − 1) rounds of a chunk: worker r sends
    every chunk but r + 1 in the reduce-scatter and every chunk but r + 2 in the all-gather; an all-gather forwards
    n − 1 messages."""
    net = make_network("edge-10m")
    comm = SimulatedCommunicator(make_topology("ring", n) if n > 2 else make_topology("complete", max(n, 1)), net)
    x = torch.randn(n, d, dtype=torch.float64)
    torch.testing.assert_close(comm.allreduce_mean(x), x.mean(0).expand(n, d), rtol=0, atol=1e-15)
    traffic = comm.drain()
    assert traffic.comm_time_s == pytest.approx(2 * (n - 1) * (net.latency_s + 32 * d / (n * net.bandwidth_bps)))
    chunks = [len(c) for c in torch.tensor_split(torch.arange(d), n)]
    expected = [32.0 * (2 * d - chunks[(r + 1) % n] - chunks[(r + 2) % n]) if n > 1 else 0.0 for r in range(n)]
    assert traffic.worker_bits.tolist() == expected
    assert traffic.wire_bits == pytest.approx(2 * (n - 1) / n * 32 * d) and traffic.paper_bits == 32 * d
    comm.allgather_mean(make_compressor("top:0.5").compress(torch.randn(n, 8)))
    traffic = comm.drain()
    bits = 8 * math.ceil(make_compressor("top:0.5").wire_bits([8]) / 8)
    assert traffic.worker_bits.tolist() == [(n - 1) * bits] * n


def test_collectives_are_refused_on_a_broadcast_medium():
    from bench.algorithms import ALGORITHMS

    net = make_network("edge-10m,medium=broadcast")
    for name in ALGORITHMS.names():
        cls = ALGORITHMS.get(name)
        if cls.centralized:
            with pytest.raises(BenchError, match="medium=broadcast"):
                cls.check_network(net)
        else:
            cls.check_network(net)
