"""``sign``: scaled sign (‖x‖₁/d)·sign(x) per row and segment, with sign(0) taken as +1 so that
each entry fits one bit. Biased; δ = ‖x‖₁²/(d‖x‖₂²) depends on the data.

Bits per segment of d entries: paper d + 32, wire d + 32 (packed sign bits + one fp32 scale).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..specs import Spec
from .base import Compressor, register, reject_arg


@register
@dataclass(frozen=True)
class Sign(Compressor):
    name: ClassVar[str] = "sign"
    examples: ClassVar[tuple[str, ...]] = ("sign",)
    unbiased: ClassVar[bool] = False

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "Sign":
        reject_arg(spec)
        spec.check_options(set())
        return cls()

    @property
    def spec(self) -> str:
        return "sign"

    def _compress_segment(self, seg: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        # The scale ‖x‖₁/d minimises ‖c·sign(x) − x‖² over c; a zero row gets scale 0, so zeros.
        # Mapping sign(0) to +1 leaves the error at ‖x‖² − ‖x‖₁²/d because 0·(+1) adds nothing to
        # ⟨sign(x), x⟩ = ‖x‖₁.
        scale = seg.abs().sum(dim=1, keepdim=True) / seg.shape[1]
        return torch.where(seg >= 0, scale, -scale)

    def _segment_wire_bits(self, d: int) -> float:
        return d + 32.0

    def _segment_paper_bits(self, d: int) -> float:
        return d + 32.0
