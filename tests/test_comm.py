"""The simulated communicator: structured gossip equals W @ x, accounting, the network model."""
import math

import numpy as np
import pytest
import torch

from bench.comm import NETWORK_PRESETS, Mixer, SimulatedCommunicator, make_network
from bench.comm.mixing import _block_columns as _BLOCK_COLUMNS
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import TOPOLOGIES, make_topology

CASES = [
    ("ring", 3, "mean"), ("ring", 16, "circulant"), ("exponential", 16, "circulant"),
    ("complete", 7, "mean"), ("torus", 12, "torus"), ("torus", 36, "torus"), ("star", 6, "sparse"),
    ("social", 32, "sparse"), ("erdos-renyi:0.3", 20, "sparse"), ("random-regular:3", 10, None),
]


@pytest.mark.parametrize("spec,n,method", CASES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_structured_gossip_equals_dense_product_and_accumulates_it_in_place(spec, n, method, dtype):
    """mixer(x) = W x and accumulate(out, x, s) adds (W + s·I) x into out, in place, whatever the structure used."""
    topo = make_topology(spec, n)
    mixer = Mixer(topo.W, topo.grid_shape)
    if method is not None:
        assert mixer.method == method
    gen = torch.Generator().manual_seed(n)
    x, out = (torch.randn(n, 33, generator=gen, dtype=dtype) for _ in range(2))
    W = torch.tensor(topo.W, dtype=torch.float64)
    tol = 1e-13 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(mixer(x).double(), W @ x.double(), rtol=0, atol=tol)
    assert mixer(x).dtype == dtype
    for shift in (0.0, -1.0):
        expected = out.double() + (W + shift * torch.eye(n, dtype=torch.float64)) @ x.double()
        assert mixer.accumulate(out, x, self_shift=shift).data_ptr() == out.data_ptr()
        torch.testing.assert_close(out.double(), expected, rtol=0, atol=tol * 10)


def test_mixing_handles_extra_dimensions_and_leaves_input_alone():
    topo = make_topology("torus", 9)
    x = torch.randn(9, 4, 5, dtype=torch.float64)
    copy = x.clone()
    out = Mixer(topo.W, topo.grid_shape)(x)
    dense = (torch.tensor(topo.W) @ x.reshape(9, -1)).reshape(9, 4, 5)
    torch.testing.assert_close(out, dense, rtol=0, atol=1e-13)
    assert torch.equal(x, copy)


@pytest.mark.parametrize("spec,n,method", [c for c in CASES if c[2] in ("circulant", "torus")])
@pytest.mark.parametrize("shape", [(40,), (5, 8)])
def test_a_large_product_mixed_in_column_blocks_gives_the_same_bits(monkeypatch, spec, n, method, shape):
    """On a CPU a circulant or torus product of many columns runs a block of columns at a time (the block's rows
    stay in the cache across the shifted adds): the same additions in the same order, so bit for bit the product
    taken whole, blocks of any width, extra dimensions included. Forced here on small tensors by a small block."""
    import bench.comm.mixing as mixing

    topo = make_topology(spec, n)
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, *shape, generator=gen)
    start = torch.randn(n, *shape, generator=gen)
    monkeypatch.setattr(mixing, "_block_columns", lambda x: None)
    whole = Mixer(topo.W, topo.grid_shape).accumulate(start.clone(), x, self_shift=-1.0)
    for block_bytes in (2 * n * 4 * 3, 2 * n * 4 * 7):  # 3 and 7 columns a block: the last block is shorter
        monkeypatch.setattr(mixing, "BLOCK_BYTES", block_bytes)
        monkeypatch.setattr(mixing, "_block_columns", _BLOCK_COLUMNS)
        assert mixing._block_columns(x) in (3, 7)
        out = start.clone()
        assert Mixer(topo.W, topo.grid_shape).accumulate(out, x, self_shift=-1.0).data_ptr() == out.data_ptr()
        assert torch.equal(out, whole)


@pytest.mark.parametrize("spec,n,method", [c for c in CASES if c[2] in ("circulant", "torus")])
def test_a_small_product_shifted_by_rolled_copies_gives_the_same_bits(monkeypatch, spec, n, method):
    """Below SMALL_SHIFT entries a shifted add takes a rolled copy instead of two narrowed adds: the same additions
    on every entry in the same order, so the same bits."""
    import bench.comm.mixing as mixing

    topo = make_topology(spec, n)
    gen = torch.Generator().manual_seed(n)
    x, start = torch.randn(n, 33, generator=gen), torch.randn(n, 33, generator=gen)
    assert x.numel() <= mixing.SMALL_SHIFT
    rolled = Mixer(topo.W, topo.grid_shape).accumulate(start.clone(), x, self_shift=-1.0)
    monkeypatch.setattr(mixing, "SMALL_SHIFT", 0)
    narrowed = Mixer(topo.W, topo.grid_shape).accumulate(start.clone(), x, self_shift=-1.0)
    assert torch.equal(rolled, narrowed)


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


def test_allreduce_mean_is_exact_and_costs_a_ring_allreduce():
    n, d = 6, 50
    net = make_network("edge-10m")
    comm = SimulatedCommunicator(make_topology("ring", n), net)
    x = torch.randn(n, d, dtype=torch.float64)
    out = comm.allreduce_mean(x)
    torch.testing.assert_close(out, x.mean(0).expand(n, d), rtol=0, atol=1e-15)
    traffic = comm.drain()
    M = 32 * d
    assert traffic.comm_time_s == pytest.approx(2 * (n - 1) * (net.latency_s + M / (n * net.bandwidth_bps)))
    assert traffic.wire_bits == pytest.approx(2 * (n - 1) / n * M)


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


def test_allreduce_time_model_single_worker_is_free():
    assert make_network().allreduce_time(1e6, 1) == 0.0
    assert np.isclose(make_network().allreduce_time(0, 2), 2 * make_network().latency_s)


# -- what a worker puts on its links: hand counts -----------------------------------------------------------------
# (spec, n, out-degree of every worker): each neighbour gets its own copy of a gossip message
DEGREES = [
    ("ring", 8, [2] * 8), ("torus", 16, [4] * 16), ("exponential", 16, [7] * 16),  # 1, 2, 4 and 8 ahead: 8 ≡ −8
    ("complete", 6, [5] * 6), ("star", 6, [5, 1, 1, 1, 1, 1]),
    ("one-peer-exp", 16, [1] * 16),  # every round: one peer, i − 2^k
]


@pytest.mark.parametrize("spec,n,degrees", DEGREES)
def test_a_gossip_puts_one_copy_on_every_link(spec, n, degrees):
    comm = SimulatedCommunicator(make_topology(spec, n), make_network("p2p-100m"))
    message = make_compressor("none").compress(torch.randn(n, 10))  # 320 bits
    for _ in range(3):  # the one-peer graph changes its links every round, never their number
        comm.gossip(message)
        traffic = comm.drain()
        assert traffic.worker_bits.tolist() == [320.0 * k for k in degrees]
        assert traffic.wire_bits == pytest.approx(320.0 * np.mean(degrees))
        assert traffic.wire_bits_max == 320.0 * max(degrees) and traffic.paper_bits == 320.0


@pytest.mark.parametrize("spec, n", [(e.spec, e.n) for name in TOPOLOGIES.names() for e in TOPOLOGIES.get(name).examples
                                     if not TOPOLOGIES.get(name).external])
def test_every_worker_sends_a_gossip_on_each_of_its_links_of_the_round(spec, n):
    """Every registered example: a worker's bits are one message per neighbour it has that round (its own degree
    on an irregular graph such as the social one), the mean over workers the wire bits."""
    topo = make_topology(spec, n)
    comm = SimulatedCommunicator(topo)
    for t in range(2):
        degrees = np.bincount(topo.links_at(t).src, minlength=n)
        comm.gossip(make_compressor("none").compress(torch.randn(n, 4)))  # 128 bits
        traffic = comm.drain()
        assert traffic.worker_bits.tolist() == [128.0 * k for k in degrees]
        assert traffic.wire_bits == pytest.approx(128.0 * degrees.mean()) and traffic.paper_bits == 128.0
        assert traffic.wire_bits_max == 128.0 * max(degrees)
    if not topo.time_varying:
        assert degrees.tolist() == [len(topo.neighbors(i)) for i in range(n)]


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


@pytest.mark.parametrize("n,d", [(4, 12), (5, 12), (8, 3), (2, 7), (1, 9)])
def test_collectives_count_what_each_worker_sends_on_its_ring_link(n, d):
    """Ring all-reduce in n chunks (tensor_split): worker r sends every chunk but r + 1 in the reduce-scatter and
    every chunk but r + 2 in the all-gather; an all-gather forwards n − 1 messages."""
    comm = SimulatedCommunicator(make_topology("ring", n) if n > 2 else make_topology("complete", max(n, 1)))
    comm.allreduce_mean(torch.randn(n, d))
    traffic = comm.drain()
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
