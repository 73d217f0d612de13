"""The real encoding: exact round trips and exact sizes for every operator, the bit packer, and
compression randomness that a process holding only some rows reproduces."""
from __future__ import annotations

import math

import pytest
import torch

from bench.compressors import RowStream, make_compressor
from bench.compressors.sparsify import kept_count, seeded_indices
from bench.compressors.wire import decode, encode, pack_bits, payload_bytes, unpack_bits
from bench.errors import BenchError

from test_compressors import EXAMPLE_SPECS, gen

# Layouts with one-entry segments (top-k indices of zero bits), odd sizes and a d that is not a
# multiple of 8, so the padding and the bit offsets straddle bytes.
LAYOUTS = [[1], [13], [1, 1, 1], [5, 1, 17, 40], [3, 7, 1, 9, 2]]


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


def test_none_s_single_copy_gives_the_per_segment_message(monkeypatch):
    """``none`` copies x once in compress: the message and bytes of the per-segment path every other operator takes."""
    from bench.compressors.base import Compressor

    comp, layout = make_compressor("none"), [5, 1, 17, 40]
    x = gaussian(3, sum(layout))
    fast = comp.compress(x, None, layout)
    monkeypatch.setattr(type(comp), "compress", Compressor.compress)
    slow = comp.compress(x, None, layout)
    assert torch.equal(torch.stack(encode(comp, fast, layout)), torch.stack(encode(comp, slow, layout)))


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
    # (the receiver has no index, only the seed: the round trips above decode payloads that hold none)


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
