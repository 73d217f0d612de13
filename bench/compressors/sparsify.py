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

import torch

from ..specs import Spec
from .base import Compressor, Message, WireField
from .rows import RandomSource, draw_seeds
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


# A sparse message is added to a copy entry by entry up to this kept fraction, and as the dense sum above it.
_SPARSE_ADD_MAX_FRACTION = 0.1


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
        index = seg.abs().topk(k, dim=1, sorted=False).indices  # the k largest |x| of each row, unordered
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
