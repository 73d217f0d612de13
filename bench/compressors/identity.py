"""``none``: the identity operator, exact communication (δ = 1).

Bits per segment of d entries: paper 32·d, wire 32·d (float32 values).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import torch

from ..specs import Spec
from .base import Compressor, Message, _check_input, reject_arg, register


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

    def compress(
        self,
        x: torch.Tensor,
        generator: torch.Generator | None = None,
        segments: Sequence[int] | None = None,
    ) -> Message:
        # Segments change nothing for the identity; skip the split. Clone so that a caller
        # adding into the payload can never write into its own x.
        segments = _check_input(x, segments)
        return Message(values=x.clone(), wire_bits=self.wire_bits(segments), paper_bits=self.paper_bits(segments))

    def _compress_segment(self, seg: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return seg.clone()

    def _segment_wire_bits(self, d: int) -> float:
        return 32.0 * d

    def _segment_paper_bits(self, d: int) -> float:
        return 32.0 * d

    def delta(self, d: int) -> float | None:
        return 1.0
