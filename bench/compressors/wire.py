"""The real bytes of a compressed message: ``encode`` packs each local row's parts into exactly
⌈wire_bits / 8⌉ bytes, ``decode`` turns such bytes back into the values the sender computed.

Layout of one row, fields taken in segment order and, within a segment, in ``wire_fields`` order:
1. every 32-bit field (float32 scales and values, rand-k seeds) as little-endian 4-byte words;
   byte-aligned, so float payloads are copied, not taken apart bit by bit (``none`` is a memcpy);
2. every other field (sign bits, QSGD levels, top-k indices) as one bit stream, each entry
   ``width`` bits least significant bit first, bit i of the stream in bit i % 8 of its i // 8-th
   byte, zero-padded to a whole byte.
Floats go as float32, so float64 messages arrive float32-rounded: decoding them gives the values
computed from float32-rounded scales and kept entries, not the sender's float64 ones.
"""
from __future__ import annotations

import math
import sys
from typing import Sequence

import torch

from ..errors import BenchError
from .base import Compressor, Message, WireField, _check_segments

MAX_WIDTH = 62  # int64 holds the codes; keeping clear of the sign bit keeps shifts simple
WORD = 32  # fields this wide travel as whole 4-byte words
# Words are the tensors' own bytes, which are little-endian on every platform torch ships for;
# refuse rather than send byte-swapped floats.
assert sys.byteorder == "little", "wire encoding assumes a little-endian host"


def payload_bytes(comp: Compressor, segments: Sequence[int] | int) -> int:
    """Bytes one row's encoding takes, what a receiver allocates."""
    return math.ceil(comp.wire_bits(segments) / 8)


# -- bit packing ---------------------------------------------------------------------------------
def _to_bits(codes: torch.Tensor, width: int) -> torch.Tensor:
    """int64 [..., m] → uint8 0/1 [..., m·width], least significant bit first."""
    shifts = torch.arange(width, device=codes.device, dtype=torch.int64)
    return ((codes.unsqueeze(-1) >> shifts) & 1).to(torch.uint8).flatten(-2)


def _from_bits(bits: torch.Tensor, width: int) -> torch.Tensor:
    """uint8 0/1 [..., m·width] → int64 [..., m]; the inverse of _to_bits."""
    if width == 0:
        raise ValueError("a zero-width field has no bits to count its entries by")
    shifts = torch.arange(width, device=bits.device, dtype=torch.int64)
    grouped = bits.reshape(*bits.shape[:-1], -1, width).to(torch.int64)
    return (grouped << shifts).sum(-1)


def _bits_to_bytes(bits: torch.Tensor) -> torch.Tensor:
    """uint8 0/1 [..., n] → uint8 [..., ⌈n/8⌉], zero-padded."""
    pad = -bits.shape[-1] % 8
    if pad:
        bits = torch.nn.functional.pad(bits, (0, pad))
    shifts = torch.arange(8, device=bits.device, dtype=torch.uint8)
    return (bits.reshape(*bits.shape[:-1], -1, 8) << shifts).sum(-1, dtype=torch.uint8)


def _bytes_to_bits(data: torch.Tensor) -> torch.Tensor:
    shifts = torch.arange(8, device=data.device, dtype=torch.uint8)
    return ((data.unsqueeze(-1) >> shifts) & 1).flatten(-2)


def _check_width(width: int) -> None:
    if not 0 <= width <= MAX_WIDTH:
        raise BenchError(f"bit width {width} is outside 0..{MAX_WIDTH}")


def pack_bits(ints: torch.Tensor, width: int) -> torch.Tensor:
    """int64 [..., m] with entries in [0, 2^width) → uint8 [..., ⌈m·width/8⌉]."""
    _check_width(width)
    ints = ints.long()
    if ints.numel() and (int(ints.min()) < 0 or int(ints.max()) >> width):
        raise BenchError(f"pack_bits got entries outside 0..2^{width} − 1 (min {int(ints.min())}, max {int(ints.max())})")
    return _bits_to_bytes(_to_bits(ints, width))


def unpack_bits(data: torch.Tensor, width: int, count: int) -> torch.Tensor:
    """uint8 [..., nbytes] → int64 [..., count]; the padding bits past count·width are ignored."""
    _check_width(width)
    if data.shape[-1] * 8 < count * width:
        raise BenchError(f"{data.shape[-1]} bytes cannot hold {count} entries of {width} bits")
    if width == 0:  # zero-width entries (top-k indices of a one-entry segment) are all 0
        return torch.zeros((*data.shape[:-1], count), dtype=torch.int64, device=data.device)
    return _from_bits(_bytes_to_bits(data)[..., : count * width], width)


# -- 32-bit words --------------------------------------------------------------------------------
def _to_words(part: torch.Tensor, is_float: bool) -> torch.Tensor:
    """[w, count] floats (as float32) or integers in [0, 2^32) → int32 [w, count] of the same bits."""
    if is_float:
        return part.to(torch.float32).contiguous().view(torch.int32)
    codes = part.to(torch.int64)
    return torch.where(codes >= 2**31, codes - 2**32, codes).to(torch.int32)


def _from_words(words: torch.Tensor, is_float: bool) -> torch.Tensor:
    return words.view(torch.float32) if is_float else words.to(torch.int64) & 0xFFFFFFFF


# -- messages ------------------------------------------------------------------------------------
def _layout(comp: Compressor, segments: list[int]) -> tuple[list[tuple[int, WireField]], list[tuple[int, WireField]]]:
    """(word fields, bit fields), each as (segment, field) in wire order."""
    fields = [(j, f) for j, d in enumerate(segments) for f in comp.wire_fields(d)]
    return [jf for jf in fields if jf[1].width == WORD], [jf for jf in fields if jf[1].width != WORD]


def encode(comp: Compressor, message: Message, segments: Sequence[int] | int) -> list[torch.Tensor]:
    """One contiguous uint8 tensor per local row, on the message's device, each
    ``payload_bytes(comp, segments)`` long; ``message`` must come from ``comp.compress``."""
    segments = _check_segments(segments)
    rows, d = message.values.shape
    if message.parts is None or len(message.parts) != len(segments) or sum(segments) != d:
        raise BenchError(f"message with d = {d} and {len(message.parts or ())} encoded segments does not "
                         f"match segments {segments}; encode a message from {comp.spec}.compress")

    wire_parts = [comp.wire_parts(p) for p in message.parts]

    def part(j: int, field: WireField) -> torch.Tensor:
        found = wire_parts[j].get(field.name)
        if found is None:
            raise BenchError(f"message lacks part {field.name!r} that {comp.spec} sends; was it made by another operator?")
        return found.reshape(rows, field.count)

    word_fields, bit_fields = _layout(comp, segments)
    chunks = []
    if word_fields:
        words = torch.cat([_to_words(part(j, f), f.is_float) for j, f in word_fields], dim=1)
        chunks.append(words.view(torch.uint8))
    if bit_fields:
        bits = [_to_bits(part(j, f).to(torch.int64), f.width) for j, f in bit_fields]
        chunks.append(_bits_to_bytes(torch.cat(bits, dim=1)))
    packed = torch.cat(chunks, dim=1)
    return list(packed.unbind(0))


def decode(comp: Compressor, payload: torch.Tensor, segments: Sequence[int] | int,
           dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> torch.Tensor:
    """Values [d] from one row's bytes (or [m, d] from m rows' bytes stacked as [m, nbytes]),
    bit for bit what the sender's ``message.values`` held when those were float32."""
    segments = _check_segments(segments)
    expected = payload_bytes(comp, segments)
    if payload.dtype != torch.uint8 or payload.dim() not in (1, 2) or payload.shape[-1] != expected:
        raise BenchError(f"payload shaped {tuple(payload.shape)} ({payload.dtype}) is not uint8 [{expected}] "
                         f"or [m, {expected}], the size of {comp.spec} over segments {segments}")
    device = payload.device if device is None else torch.device(device)
    data = payload.to(device).reshape(-1, expected)
    word_fields, bit_fields = _layout(comp, segments)
    word_count = sum(f.count for _, f in word_fields)
    # A fresh copy, because viewing bytes as int32 needs row strides that are whole words.
    words = data[:, : 4 * word_count].clone(memory_format=torch.contiguous_format).view(torch.int32)
    bits = _bytes_to_bits(data[:, 4 * word_count :])
    parts: list[dict[str, torch.Tensor]] = [{} for _ in segments]
    offset = 0
    for j, field in word_fields:
        value = _from_words(words[:, offset : offset + field.count], field.is_float)
        parts[j][field.name] = value.to(dtype) if field.is_float else value
        offset += field.count
    offset = 0
    for j, field in bit_fields:
        span = field.count * field.width
        if field.width:
            parts[j][field.name] = _from_bits(bits[:, offset : offset + span], field.width)
        else:  # a lone position's index: no bits, always 0
            parts[j][field.name] = torch.zeros((data.shape[0], field.count), dtype=torch.int64, device=device)
        offset += span
    pieces = [comp._decode_segment(p, d) for p, d in zip(parts, segments)]
    values = torch.cat(pieces, dim=1)
    return values[0] if payload.dim() == 1 else values
