"""``none``: the identity operator, exact communication (δ = 1).

Bits per segment of d entries: paper 32·d, wire 32·d (float32 values). The only part is the
values themselves, so the message holds them once.
"""
from __future__ import annotations

import torch

from ..catalog import compressors as catalog
from .base import Compressor, WireField, register
from .rows import RandomSource


@register
class Identity(catalog.Identity, Compressor):
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
