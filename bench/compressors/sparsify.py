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
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np
import torch

from ..specs import Spec
from .base import Compressor, Message, WireField
from .rows import RandomSource, draw_seeds
from .halves import in_halves
from .scratch import temporary
from .seeded import seeded_indices
from .spec import kept_fraction, percent, register

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
# its candidates are found this many columns of a row at a time, on two threads from this many entries
_CANDIDATE_BLOCK, _CANDIDATE_SPLIT = 1 << 17, 1 << 22
_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)
# A sparse message is added to a copy entry by entry up to this kept fraction, and as the dense sum above it.
_SPARSE_ADD_MAX_FRACTION = 0.1


def _full_topk(seg: torch.Tensor, k: int) -> torch.Tensor:
    w, d = seg.shape
    return torch.abs(seg, out=temporary("abs", (w, d), seg.dtype, seg.device)).topk(k, dim=1, sorted=False).indices


def largest_magnitudes(seg: torch.Tensor, k: int) -> torch.Tensor:
    """Indices [w, k] of the k largest |entries| of each row of ``seg``, unordered.

    On CPU, ``torch.topk`` over a long row costs many times a pass over it. For long rows with a
    small k we first find a threshold that leaves a few times k candidates (the order statistic of
    an evenly spaced probe of each row), take the entries at or above it, and run topk over those
    only (``_candidates``: numpy, a block of a row at a time in the cache). The result is the same set
    topk gives (ties at the k-th value aside, which topk breaks arbitrarily as well); a row whose probe
    left fewer than k candidates sends the stack to the full topk."""
    w, d = seg.shape
    if (seg.device.type != "cpu" or d < _CANDIDATE_MIN_D or k > _CANDIDATE_MAX_FRACTION * d
            or seg.dtype not in _NUMPY_FLOATS or w == 0):
        return _full_topk(seg, k)
    probe = seg[:, :: max(1, d // _PROBES)].abs()
    rank = max(1, int(probe.shape[1] * (1.0 - _MARGIN * k / d)))
    threshold = probe.kthvalue(rank, dim=1, keepdim=True).values
    rows = seg.detach().numpy()
    columns, magnitudes = _candidates(rows, threshold.view(-1).numpy())
    counts = np.array([len(c) for c in columns])
    if int(counts.min()) < k:
        return _full_topk(seg, k)
    # a [w, width] table of each row's candidates side by side (in column order), padded below every |x|
    width = int(counts.max())
    values = np.full((w, width), -1.0, dtype=rows.dtype)
    column = np.zeros((w, width), dtype=np.int64)
    for r in range(w):
        values[r, : counts[r]], column[r, : counts[r]] = magnitudes[r], columns[r]
    chosen = torch.from_numpy(values).topk(k, dim=1, sorted=False).indices
    return torch.from_numpy(column).gather(1, chosen)


def _candidates(rows: np.ndarray, thresholds: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per row r of ``rows`` [w, d] (a view of the segment, whatever its row stride): the columns where |x| is at
    least ``thresholds[r]``, ascending, and those |x|. |x| and the test are made ``_CANDIDATE_BLOCK`` columns at
    a time, in the cache, never written out whole; from 4 M entries the rows are split between two threads (numpy
    releases the GIL in its loops). 64 × 10⁶ keeping 1 %: 50-90 ms against 165-190 ms for torch's blocks and
    mask scan (docs/performance.md)."""
    w, d = rows.shape
    columns: list[np.ndarray] = [np.empty(0, np.int64)] * w
    magnitudes: list[np.ndarray] = [np.empty(0, rows.dtype)] * w

    def work(lo: int, hi: int) -> None:
        scratch = np.empty(min(d, _CANDIDATE_BLOCK), rows.dtype)
        for r in range(lo, hi):
            found, sizes = [], []
            for start in range(0, d, _CANDIDATE_BLOCK):
                block = np.abs(rows[r, start:start + _CANDIDATE_BLOCK], out=scratch[: min(d - start, _CANDIDATE_BLOCK)])
                passed = np.flatnonzero(block >= thresholds[r])
                found.append(passed + start)
                sizes.append(block[passed])
            columns[r], magnitudes[r] = np.concatenate(found), np.concatenate(sizes)

    in_halves(work, w, w * d >= _CANDIDATE_SPLIT)
    return columns, magnitudes


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
@dataclass(frozen=True)
class TopK(_Sparse, Compressor):
    """``top:F``: the largest fraction F of the coordinates (biased)."""

    fraction: float  # kept fraction F in (0, 1]

    name: ClassVar[str] = "top"
    unbiased: ClassVar[bool] = False
    sparse: ClassVar[bool] = True
    usage: ClassVar[str] = "top:F"
    summary: ClassVar[str] = "the largest fraction F of the coordinates"
    examples: ClassVar[tuple[str, ...]] = ("top:0.1", "top:0.5", "top:1.0")
    order: ClassVar[int] = 3
    marker: ClassVar[str] = "s"

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "TopK":
        spec.check_options(set(cls.options))
        return cls(fraction=kept_fraction(spec))

    @property
    def spec(self) -> str:
        return f"top:{self.fraction!r}"

    @property
    def label(self) -> str:
        return f"top {percent(self.fraction)}"

    @property
    def size(self) -> float:
        return self.fraction

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
@dataclass(frozen=True)
class RandK(_Sparse, Compressor):
    """``rand:F``: a random fraction F of the coordinates; ``unbiased=true`` scales them by d/k."""

    fraction: float  # kept fraction F in (0, 1]
    unbiased: bool = False  # scale kept entries by d/k; the authors' code never does

    name: ClassVar[str] = "rand"
    sparse: ClassVar[bool] = True
    options: ClassVar[tuple[str, ...]] = ("unbiased",)
    usage: ClassVar[str] = "rand:F"
    summary: ClassVar[str] = "a random fraction F of the coordinates"
    examples: ClassVar[tuple[str, ...]] = ("rand:0.1", "rand:0.3,unbiased=true")
    order: ClassVar[int] = 2
    marker: ClassVar[str] = "^"
    stochastic: ClassVar[bool] = True

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "RandK":
        spec.check_options(set(cls.options))
        return cls(fraction=kept_fraction(spec), unbiased=spec.option_bool("unbiased", False))

    @property
    def spec(self) -> str:
        return f"rand:{self.fraction!r},unbiased={'true' if self.unbiased else 'false'}"

    @property
    def label(self) -> str:
        return f"random {percent(self.fraction)}"

    @property
    def size(self) -> float:
        return self.fraction

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
