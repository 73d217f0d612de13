"""``top:F`` and ``rand:F``: keep k = max(1, ⌊F·d⌋) coordinates per row and segment, zero the
rest. F is the *kept* fraction (the authors' code takes a drop ratio: their 0.99 is our 0.01).

Bits per segment of d entries, k kept:
- paper: 64·k for both (a 32-bit value and a 32-bit index per kept entry);
- wire, top: k·(32 + ⌈log₂ d⌉) (values plus indices just wide enough for d positions);
- wire, rand: 32 + 32·k (one 32-bit seed from which receivers regenerate the indices, then
  the values in increasing index order).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import ClassVar

import numpy as np
import torch

from ..catalog import compressors as catalog
from .base import Compressor, Message, WireField, register
from .rows import RandomSource, draw_seeds
from .scratch import BLOCK_COLUMNS, column_blocks, temporary
from .seeded import seeded_indices

@functools.lru_cache(maxsize=1024)  # three calls a compression, each parsing the fraction's decimal
def kept_count(fraction: float, d: int) -> int:
    """k = max(1, ⌊F·d⌋), the floor taken on the decimal F a person wrote: in floating point
    0.29·100 is 28.999…, which would silently keep 28 of 100."""
    return max(1, math.floor(Fraction(repr(fraction)) * d))


def _scatter(index: torch.Tensor, kept: torch.Tensor, d: int) -> torch.Tensor:
    out = torch.zeros((kept.shape[0], d), dtype=kept.dtype, device=kept.device)
    return out.scatter_(1, index.long(), kept)


# CPU top-k through candidates pays off only on long rows with few kept entries.
_CANDIDATE_MIN_D, _CANDIDATE_MAX_FRACTION, _PROBES, _MARGIN = 1 << 16, 0.05, 4096, 2.0
# A sparse message is added to a copy entry by entry up to this kept fraction, and as the dense sum above it.
_SPARSE_ADD_MAX_FRACTION = 0.1


def _true_positions(mask: torch.Tensor) -> torch.Tensor:
    """``mask.nonzero()`` of a flat bool tensor, ascending, for a sparse mask: the mask read as 8-byte words, and
    only the words holding a True looked into (by numpy, whose scan of a bool array takes 0.4× torch's). torch's
    nonzero visits every byte in a scalar loop; on a mask of 64 × 10⁶ with 2 % set, a fifth of the words hold one,
    and this takes about half the time (docs/performance.md, "Top-k's candidates")."""
    if mask.numel() % 8 or mask.storage_offset() % 8 or not mask.is_contiguous():
        return mask.nonzero().squeeze(1)
    words = mask.view(torch.int64).nonzero().squeeze(1)
    chosen = mask.view(-1, 8).index_select(0, words).view(-1)  # [chosen words, 8], flat
    within = torch.from_numpy(np.flatnonzero(chosen.numpy()))
    word_start = words.mul_(8).index_select(0, within >> 3)
    return word_start.add_(within.bitwise_and_(7))


def _full_topk(seg: torch.Tensor, k: int) -> torch.Tensor:
    w, d = seg.shape
    return torch.abs(seg, out=temporary("abs", (w, d), seg.dtype, seg.device)).topk(k, dim=1, sorted=False).indices


def largest_magnitudes(seg: torch.Tensor, k: int) -> torch.Tensor:
    """Indices [w, k] of the k largest |entries| of each row of ``seg``, unordered.

    On CPU, ``torch.topk`` over a long row costs many times a pass over it. For long rows with a
    small k we first find a threshold that leaves a few times k candidates (the order statistic of
    an evenly spaced probe of each row), mark the entries at or above it, and run topk over those
    only. |x| and the mark are made a block of ``BLOCK_COLUMNS`` columns at a time, while the block
    is in the cache, and the candidates' magnitudes gathered from ``seg``: |x| is never written out
    whole. The result is the same set topk gives (ties at the k-th value aside, which topk breaks
    arbitrarily as well); a row whose probe left fewer than k candidates falls back to the full topk."""
    w, d = seg.shape
    if seg.device.type != "cpu" or d < _CANDIDATE_MIN_D or k > _CANDIDATE_MAX_FRACTION * d:
        return _full_topk(seg, k)
    probe = seg[:, :: max(1, d // _PROBES)].abs()
    rank = max(1, int(probe.shape[1] * (1.0 - _MARGIN * k / d)))
    threshold = probe.kthvalue(rank, dim=1, keepdim=True).values
    above = temporary("above", (w, d), torch.bool, seg.device)
    block = temporary("abs", (w, min(d, BLOCK_COLUMNS)), seg.dtype, seg.device)
    for columns, width in column_blocks(d):
        torch.ge(torch.abs(seg[:, columns], out=block[:, :width]), threshold, out=above[:, columns])
    flat = _true_positions(above.view(-1))  # row-major: each row's candidates together
    rows = torch.div(flat, d, rounding_mode="floor")
    counts = torch.bincount(rows, minlength=w)
    if int(counts.min()) < k:
        return _full_topk(seg, k)
    width = int(counts.max())
    # each candidate's slot in a [w, width] table, its row's candidates side by side from the row's start
    shift = torch.arange(w) * width - (torch.cumsum(counts, 0) - counts)
    slot = torch.repeat_interleave(shift, counts, output_size=flat.numel()).add_(torch.arange(flat.numel()))
    # the candidates' |x|: a segment of a wider stack is a view with longer rows, indexed by row and column
    columns = flat - rows * d
    found = seg.view(-1).index_select(0, flat) if seg.is_contiguous() else seg[rows, columns]
    values = torch.full((w * width,), -1.0, dtype=seg.dtype)  # below every |x|: padding is never chosen
    values.index_copy_(0, slot, found.abs_())
    column = torch.zeros(w * width, dtype=torch.int64)
    column.index_copy_(0, slot, columns)
    chosen = values.view(w, width).topk(k, dim=1, sorted=False).indices
    return column.view(w, width).gather(1, chosen)


class _Sparse:
    """What both sparsifiers share: the kept positions live in each segment's ``index`` part."""

    def support(self, message: Message) -> torch.Tensor:
        pieces = [torch.zeros(p["index"].shape[0], d, dtype=torch.bool, device=p["index"].device)
                  .scatter_(1, p["index"].long(), True) for p, d in zip(message.parts, message.segments)]
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1)

    def add_message(self, message: Message, target: torch.Tensor) -> torch.Tensor:
        """Each row's kept entries added at their positions (``scatter_add_``, each position once): on a 1 % top-k of
        64 × 10⁶ a fifth of the dense sum's time; a denser message is added whole."""
        if self.fraction > _SPARSE_ADD_MAX_FRACTION or message.parts is None:
            return super().add_message(message, target)
        for p, piece in zip(message.parts, torch.split(target, list(message.segments), dim=1)):
            piece.scatter_add_(1, p["index"].long(), p["kept"])
        return target

    def on_support(self, message: Message, values: torch.Tensor) -> Message:
        parts, pieces = [], []
        for p, d, seg in zip(message.parts, message.segments, torch.split(values, list(message.segments), dim=1)):
            kept = seg.gather(1, p["index"].long())
            parts.append({**p, "kept": kept})
            pieces.append(_scatter(p["index"], kept, d))
        dense = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1)
        return Message(values=dense, wire_bits=message.wire_bits, paper_bits=message.paper_bits,
                       parts=tuple(parts), codec=message.codec, segments=message.segments)


@register
class TopK(catalog.TopK, _Sparse, Compressor):

    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        k = kept_count(self.fraction, seg.shape[1])
        index = largest_magnitudes(seg, k)
        return {"kept": seg.gather(1, index), "index": index}

    def _decode_segment(self, parts: dict[str, torch.Tensor], d: int) -> torch.Tensor:
        return _scatter(parts["index"], parts["kept"], d)

    def _decode_segment_into(self, parts: dict[str, torch.Tensor], d: int, out: torch.Tensor) -> None:
        out.zero_().scatter_(1, parts["index"].long(), parts["kept"])

    def wire_fields(self, d: int) -> tuple[WireField, ...]:
        k = kept_count(self.fraction, d)
        index_bits = (d - 1).bit_length()  # ⌈log₂ d⌉ for d ≥ 1; a lone position needs none
        return (WireField("kept", k, 32, True), WireField("index", k, index_bits, False))

    def _segment_paper_bits(self, d: int) -> float:
        return 64.0 * kept_count(self.fraction, d)

    def delta(self, d: int) -> float | None:
        # The k largest entries carry at least a k/d share of ‖x‖², for every x.
        return kept_count(self.fraction, d) / d


@register
class RandK(catalog.RandK, _Sparse, Compressor):
    stochastic: ClassVar[bool] = True

    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        w, d = seg.shape
        k = kept_count(self.fraction, d)
        # One seed per row drawn in one call, the subsets derived from the seeds alone: that is
        # what lets a receiver regenerate them from the 32 bits on the wire.
        seed = draw_seeds(source, w, seg.device)
        index = seeded_indices(seed, d, k)
        kept = seg.gather(1, index)
        if self.unbiased:
            kept = kept * (d / k)
        # "index" is not sent; keeping it spares the sender a second hash when decoding.
        return {"seed": seed[:, None], "kept": kept, "index": index}

    def _decode_segment(self, parts: dict[str, torch.Tensor], d: int) -> torch.Tensor:
        kept = parts["kept"]
        index = parts.get("index")
        if index is None:
            index = seeded_indices(parts["seed"], d, kept.shape[1])
        return _scatter(index, kept, d)

    def wire_fields(self, d: int) -> tuple[WireField, ...]:
        return (WireField("seed", 1, 32, False), WireField("kept", kept_count(self.fraction, d), 32, True))

    def _segment_paper_bits(self, d: int) -> float:
        return 64.0 * kept_count(self.fraction, d)

    def delta(self, d: int) -> float | None:
        # E‖Q(x) − x‖² = (1 − k/d)‖x‖² unscaled; the d/k-scaled form has variance
        # (d/k − 1)‖x‖², no contraction once k < d/2.
        return None if self.unbiased else kept_count(self.fraction, d) / d
