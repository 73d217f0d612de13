"""The real encoding: exact round trips and exact sizes for every operator, the bit packer, and
compression randomness that a process holding only some rows reproduces."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bench.compressors import COMPRESSORS, RowStream, make_compressor
from bench.compressors.sparsify import kept_count, seeded_indices
from bench.compressors.wire import decode, encode, pack_bits, payload_bytes, unpack_bits
from bench.errors import BenchError

EXAMPLE_SPECS = [spec for name in COMPRESSORS.names() for spec in COMPRESSORS.get(name).examples]
# Layouts with one-entry segments (top-k indices of zero bits), odd sizes and a d that is not a
# multiple of 8, so the padding and the bit offsets straddle bytes.
LAYOUTS = [[1], [13], [1, 1, 1], [5, 1, 17, 40], [3, 7, 1, 9, 2]]


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def gaussian(rows: int, d: int, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    x = torch.randn(rows, d, generator=gen(seed), dtype=torch.float64) * 3
    x[0, : min(2, d)] = 0  # zeros and a zero first row segment exercise sign(0) and 0/0 norms
    return x.to(dtype)


# ------------------------------------------------------------------------------- packer --
@pytest.mark.parametrize("width", range(1, 33))
def test_pack_unpack_round_trip(width):
    for count in (0, 1, 7, 13):
        ints = torch.randint(0, 2**width, (3, count), generator=gen(width + count), dtype=torch.int64)
        ints[:, :1] = 2**width - 1  # the top value of the width must survive
        packed = pack_bits(ints, width)
        assert packed.dtype == torch.uint8 and packed.shape == (3, math.ceil(count * width / 8))
        assert torch.equal(unpack_bits(packed, width, count), ints)


def test_pack_bits_layout_and_errors():
    # LSB first within an entry and within a byte: 3-bit entries 1, 6 → bits 100 011 → 0b00110001.
    assert pack_bits(torch.tensor([1, 6]), 3).tolist() == [0b00110001]
    assert pack_bits(torch.tensor([0, 0]), 0).numel() == 0
    assert torch.equal(unpack_bits(torch.zeros(0, dtype=torch.uint8), 0, 4), torch.zeros(4, dtype=torch.int64))
    with pytest.raises(BenchError, match="outside"):
        pack_bits(torch.tensor([8]), 3)
    with pytest.raises(BenchError, match="outside"):
        pack_bits(torch.tensor([-1]), 3)
    with pytest.raises(BenchError, match="cannot hold"):
        unpack_bits(torch.zeros(1, dtype=torch.uint8), 3, 3)


# ------------------------------------------------------------------- every operator --
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_payload_size_is_the_wire_bits_and_round_trip_is_exact(spec, layout):
    comp = make_compressor(spec)
    x = gaussian(4, sum(layout))
    msg = comp.compress(x, gen(1), layout)
    payloads = encode(comp, msg, layout)
    assert len(payloads) == 4
    for row, payload in enumerate(payloads):
        assert payload.dtype == torch.uint8 and payload.dim() == 1 and payload.is_contiguous()
        assert payload.numel() == math.ceil(comp.wire_bits(layout) / 8) == payload_bytes(comp, layout)
        decoded = decode(comp, payload, layout, torch.float32)
        assert decoded.dtype == torch.float32
        assert torch.equal(decoded, msg.values[row])
        assert torch.equal(decoded.view(torch.int32), msg.values[row].view(torch.int32))  # bit for bit
    # Several rows decode at once.
    assert torch.equal(decode(comp, torch.stack(payloads), layout), msg.values)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS)
def test_float64_messages_arrive_float32_rounded(spec):
    comp = make_compressor(spec)
    layout = [5, 1, 17, 40]
    msg = comp.compress(gaussian(3, sum(layout), dtype=torch.float64), gen(2), layout)
    decoded = decode(comp, torch.stack(encode(comp, msg, layout)), layout, torch.float64)
    assert decoded.dtype == torch.float64
    # Only the float32 rounding of scales and kept values separates the two.
    torch.testing.assert_close(decoded, msg.values, rtol=2**-22, atol=0)
    if comp.name != "qsgd":  # values sent as they are: exactly the float32 cast
        assert torch.equal(decode(comp, torch.stack(encode(comp, msg, layout)), layout), msg.values.float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_sent_as_words_take_the_field_by_field_bytes(dtype, monkeypatch):
    """``none`` views its values as bytes and back (``wire_is_values``) and copies x once in compress: the same
    message, bytes and decoding as the per-segment path that every other operator takes."""
    from bench.compressors.base import Compressor

    comp, layout = make_compressor("none"), [5, 1, 17, 40]
    assert comp.wire_is_values and not any(COMPRESSORS.get(n).wire_is_values for n in COMPRESSORS.names() if n != "none")
    x = gaussian(3, sum(layout), dtype=dtype)
    fast = comp.compress(x, None, layout)
    fast_bytes = torch.stack(encode(comp, fast, layout))
    fast_back = decode(comp, fast_bytes, layout, dtype)
    out = torch.empty_like(x)
    assert comp.compress(x, None, layout, out=out).values is out and torch.equal(out, x)
    monkeypatch.setattr(type(comp), "wire_is_values", False)
    monkeypatch.setattr(type(comp), "compress", Compressor.compress)
    slow = comp.compress(x, None, layout)
    assert torch.equal(fast.values, slow.values) and fast.values.data_ptr() != x.data_ptr()
    assert all(torch.equal(a["values"], b["values"]) for a, b in zip(fast.parts, slow.parts))
    assert torch.equal(fast_bytes, torch.stack(encode(comp, slow, layout)))
    assert torch.equal(fast_back, decode(comp, fast_bytes, layout, dtype))


def test_a_gossip_receives_none_s_words_straight_into_float32_rows_and_decodes_every_other_message():
    """The dist gossip's shortcut (``DistributedCommunicator._values_on_wire``): a float32 ``none`` message's bytes,
    taken into a float32 row's own bytes, are that row's decoding; a float64 message (sent as float32 words) and
    every other operator's message go through ``decode``."""
    from bench.comm.distributed import DistributedCommunicator

    layout = [5, 1, 17, 40]
    x = gaussian(3, sum(layout))
    message = make_compressor("none").compress(x, None, layout)
    assert DistributedCommunicator._values_on_wire(message)
    rows = torch.full((3, sum(layout)), float("nan"))
    for row, payload in zip(rows, encode(message.codec, message, layout)):
        row.view(torch.uint8).copy_(payload)
    assert torch.equal(rows, decode(message.codec, torch.stack(encode(message.codec, message, layout)), layout))
    assert not DistributedCommunicator._values_on_wire(make_compressor("none").compress(x.double(), None, layout))
    others = [COMPRESSORS.get(family).examples[0] for family in COMPRESSORS.names() if family != "none"]
    assert len(others) == len(COMPRESSORS.names()) - 1
    for spec in others:
        comp = make_compressor(spec)
        assert not DistributedCommunicator._values_on_wire(comp.compress(x, gen(1), layout)), spec


def test_encode_and_decode_reject_mismatches():
    comp = make_compressor("sign")
    msg = comp.compress(gaussian(2, 10), None, [4, 6])
    with pytest.raises(BenchError, match="segments"):
        encode(comp, msg, [10])
    with pytest.raises(BenchError, match="part"):
        encode(make_compressor("qsgd:2"), msg, [4, 6])
    with pytest.raises(BenchError, match="uint8"):
        decode(comp, torch.zeros(3, dtype=torch.uint8), [4, 6])


# ------------------------------------------------------------------------- random-k --
def test_rand_k_indices_regenerate_from_the_seed():
    comp = make_compressor("rand:0.3,unbiased=true")
    layout = [5, 1, 17, 40]
    msg = comp.compress(gaussian(6, sum(layout)), gen(4), layout)
    for d, part in zip(layout, msg.parts):
        k = kept_count(comp.fraction, d)
        regenerated = seeded_indices(part["seed"], d, k)
        assert torch.equal(regenerated, part["index"])
        assert regenerated.shape == (6, k) and (regenerated.diff(dim=1) > 0).all()  # sorted, distinct
    # The receiver has no index, only the seed: decoding without it gives the same values.
    without = tuple({n: t for n, t in p.items() if n != "index"} for p in msg.parts)
    values = torch.cat([comp._decode_segment(p, d) for p, d in zip(without, layout)], dim=1)
    assert torch.equal(values, msg.values)


@pytest.mark.parametrize("rows,d,k", [(6, 1 << 15, 1), (3, 40_009, 2_000), (64, 1 << 16, 600), (1, 100_003, 17),
                                     (16, 8192, 1228)])
@pytest.mark.parametrize("short", [False, True])
def test_rand_k_s_cpu_candidates_give_the_subsets_of_every_key_hashed(rows, d, k, short, monkeypatch):
    """The CPU path (uint32 keys a block at a time, only those past a threshold kept; two threads from 4 M keys)
    picks the same positions as hashing every key into int64 and taking the top k, on any device; ``short``: a
    threshold that almost no key reaches, so every row takes its k largest from all of its keys."""
    from bench.compressors import seeded

    if short:
        monkeypatch.setattr(seeded, "_threshold", lambda d, k: np.uint32(2**32 - 2))
    seeds = torch.randint(0, 2**32, (rows,), generator=gen(rows + k))
    assert d >= seeded._CANDIDATE_MIN_D and k <= seeded._CANDIDATE_MAX_FRACTION * d  # the CPU path is the one taken
    got = seeded.seeded_indices(seeds, d, k)
    assert torch.equal(got, seeded._seeded_indices_torch(seeds, d, k)) and got.dtype == torch.int64


def test_rand_k_subsets_are_uniform():
    # All C(6, 2) = 15 subsets equally often over many seeds (chi-square, 14 degrees of freedom;
    # the 99.99 % quantile is about 41), and every position kept with probability k/d.
    n, d, k = 60000, 6, 2
    idx = seeded_indices(torch.randint(0, 2**32, (n,), generator=gen(0)), d, k)
    codes = (1 << idx).sum(1)
    counts = torch.bincount(codes, minlength=2**d)[torch.bincount(codes, minlength=2**d) > 0].double()
    assert counts.numel() == math.comb(d, k)
    expected = n / math.comb(d, k)
    assert float(((counts - expected) ** 2 / expected).sum()) < 41


# ------------------------------------------------------------------------ row streams --
@pytest.mark.parametrize("spec", ["qsgd:2,biased=false", "rand:0.3", "rand:0.1,unbiased=true"])
def test_row_slices_reproduce_the_single_process_draws(spec):
    comp = make_compressor(spec)
    layout, n = [5, 1, 17, 40], 6
    x = gaussian(n, sum(layout))
    whole = comp.compress(x, gen(9), layout).values
    # A plain generator is all rows; a stream over all rows is the same thing.
    assert torch.equal(comp.compress(x, RowStream(gen(9), n, 0, n), layout).values, whole)
    for cuts in ([0, 3, 6], [0, 1, 4, 6]):
        pieces = [comp.compress(x[lo:hi], RowStream(gen(9), n, lo, hi), layout).values
                  for lo, hi in zip(cuts, cuts[1:])]
        assert torch.equal(torch.cat(pieces), whole)
    # Several rounds keep in step: the second call on each stream sees the second draw.
    streams = [RowStream(gen(9), n, 0, 2), RowStream(gen(9), n, 2, 6)]
    g = gen(9)
    for _ in range(2):
        whole = comp.compress(x, g, layout).values
        halves = [comp.compress(x[s.lo : s.hi], s, layout).values for s in streams]
        assert torch.equal(torch.cat(halves), whole)


def test_row_stream_rejects_bad_rows():
    with pytest.raises(BenchError, match="rows 3..3"):
        RowStream(gen(0), 4, 3, 3)
    with pytest.raises(BenchError, match="rows 2..6"):
        RowStream(gen(0), 4, 2, 6)
    with pytest.raises(BenchError, match="2 rows"):
        make_compressor("qsgd:2").compress(torch.ones(3, 4), RowStream(gen(0), 4, 0, 2))
