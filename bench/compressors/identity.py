"""``none``: the identity operator, exact communication (δ = 1).

Bits per segment of d entries: paper 32·d, wire 32·d (float32 values). The only part is the
values themselves, so the message holds them once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import torch

from ..specs import Spec
from .base import Compressor, Message, WireField, _check_input
from .rows import RandomSource
from .spec import reject_arg, register


@register
@dataclass(frozen=True)
class Identity(Compressor):
    """``none``: exact communication (δ = 1)."""

    name: ClassVar[str] = "none"
    unbiased: ClassVar[bool] = True
    usage: ClassVar[str] = "none"
    summary: ClassVar[str] = "exact communication"
    examples: ClassVar[tuple[str, ...]] = ("none",)
    order: ClassVar[int] = 0
    marker: ClassVar[str] = "o"
    compresses_in_place = True  # the values are x; copying x onto itself is no copy

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "Identity":
        reject_arg(spec)
        spec.check_options(set(cls.options))
        return cls()

    @property
    def spec(self) -> str:
        return "none"

    @property
    def form(self) -> str:
        return "exact"

    def compress(self, x: torch.Tensor, generator: RandomSource = None, segments: Sequence[int] | None = None,
                 out: torch.Tensor | None = None) -> Message:
        """One copy of ``x`` (into ``out`` when given), its segments the parts: the per-segment path's values,
        without a copy per segment and a concatenation."""
        segments = _check_input(x, segments)
        values = x.clone() if out is None else out.copy_(x)
        parts = tuple({"values": piece} for piece in torch.split(values, segments, dim=1))
        return Message(values=values, wire_bits=self.wire_bits(segments), paper_bits=self.paper_bits(segments),
                       parts=parts, codec=self, segments=tuple(segments))

    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        return {"values": seg.clone()}

    def _decode_segment(self, parts: dict[str, torch.Tensor], d: int) -> torch.Tensor:
        return parts["values"]

    def wire_fields(self, d: int) -> tuple[WireField, ...]:
        return (WireField("values", d, 32, True),)

    def _segment_paper_bits(self, d: int) -> float:
        return 32.0 * d

    def delta(self, d: int) -> float | None:
        return 1.0
