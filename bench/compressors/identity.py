"""``none``: the identity operator, exact communication (δ = 1).

Bits per segment of d entries: paper 32·d, wire 32·d (float32 values). The only part is the
values themselves, so the message holds them once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..specs import Spec
from .base import Compressor, WireField, reject_arg, register
from .rows import RandomSource


@register
@dataclass(frozen=True)
class Identity(Compressor):
    name: ClassVar[str] = "none"
    examples: ClassVar[tuple[str, ...]] = ("none",)
    unbiased: ClassVar[bool] = True

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "Identity":
        reject_arg(spec)
        spec.check_options(set())
        return cls()

    @property
    def spec(self) -> str:
        return "none"

    @property
    def form(self) -> str:
        return "exact"

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
