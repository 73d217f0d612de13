"""``top:F`` and ``rand:F``: keep k = max(1, ⌊F·d⌋) coordinates per row and segment, zero the
rest. F is the *kept* fraction (the authors' code takes a drop ratio: their 0.99 is our 0.01).

Bits per segment of d entries, k kept:
- paper: 64·k for both (a 32-bit value and a 32-bit index per kept entry);
- wire, top: k·(32 + ⌈log₂ d⌉) (values plus indices just wide enough for d positions);
- wire, rand: 32·k + 32 (values plus one shared 32-bit seed from which receivers regenerate
  the indices).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import torch

from ..specs import Spec, parse_fraction
from .base import Compressor, register


def kept_count(fraction: float, d: int) -> int:
    """k = max(1, ⌊F·d⌋), the floor taken on the decimal F a person wrote: in floating point
    0.29·100 is 28.999…, which would silently keep 28 of 100."""
    return max(1, math.floor(Fraction(repr(fraction)) * d))


def _scatter_kept(seg: torch.Tensor, idx: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    kept = seg.gather(1, idx)
    if scale != 1.0:
        kept = kept * scale
    return torch.zeros_like(seg).scatter_(1, idx, kept)


@register
@dataclass(frozen=True)
class TopK(Compressor):
    fraction: float  # kept fraction F in (0, 1]

    name: ClassVar[str] = "top"
    examples: ClassVar[tuple[str, ...]] = ("top:0.1", "top:0.5", "top:1")
    unbiased: ClassVar[bool] = False

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "TopK":
        spec.check_options(set())
        return cls(fraction=parse_fraction(spec))

    @property
    def spec(self) -> str:
        return f"top:{self.fraction!r}"

    def _compress_segment(self, seg: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        k = kept_count(self.fraction, seg.shape[1])
        idx = seg.abs().topk(k, dim=1, sorted=False).indices
        return _scatter_kept(seg, idx)

    def _segment_wire_bits(self, d: int) -> float:
        index_bits = (d - 1).bit_length()  # ⌈log₂ d⌉ for d ≥ 1
        return kept_count(self.fraction, d) * (32.0 + index_bits)

    def _segment_paper_bits(self, d: int) -> float:
        return 64.0 * kept_count(self.fraction, d)

    def delta(self, d: int) -> float | None:
        # The k largest entries carry at least a k/d share of ‖x‖², for every x.
        return kept_count(self.fraction, d) / d


@register
@dataclass(frozen=True)
class RandK(Compressor):
    fraction: float  # kept fraction F in (0, 1]
    unbiased: bool = False  # scale kept entries by d/k; the authors' code never does

    name: ClassVar[str] = "rand"
    stochastic: ClassVar[bool] = True
    examples: ClassVar[tuple[str, ...]] = ("rand:0.1", "rand:0.3,unbiased=true")

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "RandK":
        spec.check_options({"unbiased"})
        return cls(fraction=parse_fraction(spec), unbiased=spec.option_bool("unbiased", False))

    @property
    def spec(self) -> str:
        return f"rand:{self.fraction!r},unbiased={'true' if self.unbiased else 'false'}"

    def _compress_segment(self, seg: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        w, d = seg.shape
        k = kept_count(self.fraction, d)
        # The k largest of d i.i.d. uniforms form a uniformly random k-subset, drawn
        # independently for each row in one call.
        noise = torch.rand((w, d), generator=generator, device=seg.device)
        idx = noise.topk(k, dim=1, sorted=False).indices
        return _scatter_kept(seg, idx, d / k if self.unbiased else 1.0)

    def _segment_wire_bits(self, d: int) -> float:
        return 32.0 * kept_count(self.fraction, d) + 32.0

    def _segment_paper_bits(self, d: int) -> float:
        return 64.0 * kept_count(self.fraction, d)

    def delta(self, d: int) -> float | None:
        # E‖Q(x) − x‖² = (1 − k/d)‖x‖² unscaled; the d/k-scaled form has variance
        # (d/k − 1)‖x‖², no contraction once k < d/2.
        return None if self.unbiased else kept_count(self.fraction, d) / d
