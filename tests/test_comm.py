"""The simulated communicator: structured gossip equals W @ x, accounting, the network model."""
import numpy as np
import pytest
import torch

from bench.comm import NETWORK_PRESETS, Mixer, SimulatedCommunicator, make_network
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.topology import make_topology

CASES = [
    ("ring", 3, "mean"), ("ring", 16, "circulant"), ("exponential", 16, "circulant"),
    ("complete", 7, "mean"), ("torus", 12, "torus"), ("torus", 36, "torus"), ("star", 6, "sparse"),
    ("social", 32, "sparse"), ("erdos-renyi:0.3", 20, "sparse"), ("random-regular:3", 10, None),
]


@pytest.mark.parametrize("spec,n,method", CASES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_structured_gossip_equals_dense_product(spec, n, method, dtype):
    topo = make_topology(spec, n)
    mixer = Mixer(topo.W, topo.grid_shape)
    if method is not None:
        assert mixer.method == method
    x = torch.randn(n, 33, generator=torch.Generator().manual_seed(n), dtype=dtype)
    dense = torch.tensor(topo.W, dtype=torch.float64) @ x.double()
    tol = 1e-13 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(mixer(x).double(), dense, rtol=0, atol=tol)
    assert mixer(x).dtype == dtype


def test_mixing_handles_extra_dimensions_and_leaves_input_alone():
    topo = make_topology("torus", 9)
    x = torch.randn(9, 4, 5, dtype=torch.float64)
    copy = x.clone()
    out = Mixer(topo.W, topo.grid_shape)(x)
    dense = (torch.tensor(topo.W) @ x.reshape(9, -1)).reshape(9, 4, 5)
    torch.testing.assert_close(out, dense, rtol=0, atol=1e-13)
    assert torch.equal(x, copy)


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
    assert traffic.messages == 2 and traffic.wire_bits == 2 * bits
    assert traffic.paper_bits == 2 * comp.paper_bits([100])
    assert traffic.comm_time_s == pytest.approx(2 * 2 * (net.latency_s + bits / net.bandwidth_bps))
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
    assert make_network("edge-10m").gossip_time(1e6, 2) > make_network("datacenter-100g").gossip_time(1e6, 2)
    for bad, word in [("infiniband", "infiniband"), ("p2p-100m,bandwidth=-1", "bandwidth"),
                      ("p2p-100m,speed=3", "speed"), ("edge-10m,latency=abc", "latency")]:
        with pytest.raises(BenchError, match=word):
            make_network(bad)


def test_allreduce_time_model_single_worker_is_free():
    assert make_network().allreduce_time(1e6, 1) == 0.0
    assert np.isclose(make_network().allreduce_time(0, 2), 2 * make_network().latency_s)


@pytest.mark.parametrize("spec,n,method", CASES)
@pytest.mark.parametrize("shift", [0.0, -1.0])
def test_accumulating_gossip_adds_the_shifted_product_in_place(spec, n, method, shift):
    topo = make_topology(spec, n)
    mixer = Mixer(topo.W, topo.grid_shape)
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(n, 17, generator=gen, dtype=torch.float64)
    out = torch.randn(n, 17, generator=gen, dtype=torch.float64)
    expected = out + (torch.tensor(topo.W) + shift * torch.eye(n, dtype=torch.float64)) @ x
    result = mixer.accumulate(out, x, self_shift=shift)
    assert result.data_ptr() == out.data_ptr()  # in place
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-13)
