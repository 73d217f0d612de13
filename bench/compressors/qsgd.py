"""``qsgd:B``: QSGD with B bits, s = 2^B − 1 levels (Alistarh et al. 2017), per row and segment:
Q(x)_j = ‖x‖₂ sign(x_j) ξ_j / s with ξ_j the stochastic rounding of s|x_j|/‖x‖₂ (unbiased: on a CPU to
2^-16 of a level, the resolution of its random offsets, bench/compressors/rows.py ``draw_rounding``).
The contraction form (option ``biased=true``, Choco's default) divides by τ = 1 + min(d/s², √d/s).

Bits per segment of d entries: paper B·d (the norm is not counted); wire 32 + d·(B + 1)
(one fp32 scale ‖x‖₂/s or ‖x‖₂/(sτ), then per entry ξ ∈ {0..s} in B bits and one sign bit).
The scale rather than the norm goes on the wire so that decoding is one multiplication,
which rounds the same on every device: decoded values equal the sender's bit for bit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..specs import Spec
from .base import Compressor, WireField
from .rows import RandomSource, draw_rounding
from .spec import parse_bits, register


def _level_dtype(levels: int) -> torch.dtype:
    """The narrowest integer type holding 0..levels + 1 (a level before its clamp): a message's level indices take
    a quarter of float32's memory up to 7 bits."""
    return torch.uint8 if levels < 255 else torch.int32


@register
@dataclass(frozen=True)
class QSGD(Compressor):
    """``qsgd:B``: B bits per level index; ``biased=true`` the rescaled contraction (the default of an
    algorithm that needs a contraction, as Choco does)."""

    bits: int  # B: the level index ξ ∈ {0..2^B − 1} fits B bits
    biased: bool  # True: divide by τ, a δ = 1/τ contraction; False: the unbiased original

    name: ClassVar[str] = "qsgd"
    options: ClassVar[tuple[str, ...]] = ("biased",)
    usage: ClassVar[str] = "qsgd:B"
    summary: ClassVar[str] = "B bits, s = 2^B − 1 levels; a contraction where the algorithm needs one"
    examples: ClassVar[tuple[str, ...]] = ("qsgd:2,biased=true", "qsgd:2,biased=false", "qsgd:8,biased=true")
    order: ClassVar[int] = 1
    marker: ClassVar[str] = "v"
    stochastic: ClassVar[bool] = True

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "QSGD":
        spec.check_options(set(cls.options))
        bits = parse_bits(spec)
        return cls(bits=bits, biased=spec.option_bool("biased", contraction))

    @property
    def unbiased(self) -> bool:
        return not self.biased

    @property
    def spec(self) -> str:
        return f"qsgd:{self.bits},biased={'true' if self.biased else 'false'}"

    @property
    def label(self) -> str:
        return f"QSGD {self.bits}-bit"

    @property
    def size(self) -> float:
        return float(self.bits)

    @property
    def levels(self) -> int:
        return 2**self.bits - 1

    def tau(self, d: int) -> float:
        """QSGD's variance bound: E‖Q(x) − x‖² ≤ (τ − 1)‖x‖² for the unbiased form."""
        s = self.levels
        return 1.0 + min(d / s**2, math.sqrt(d) / s)

    def _multiplier_and_scale(self, seg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row [w, 1]: s/‖x‖ (v = s|x|/‖x‖ is the level before rounding) and the scale a level is sent with."""
        s = self.levels
        norm = torch.linalg.vector_norm(seg, dim=1, keepdim=True)
        # A zero row has level 0 everywhere; dividing by 1 instead of 0 keeps NaN out.
        safe_norm = torch.where(norm > 0, norm, torch.ones_like(norm))
        scale = norm / (s * self.tau(seg.shape[1])) if self.biased else norm / s
        return s / safe_norm, scale

    def _levels_into(self, seg: torch.Tensor, multiplier: torch.Tensor, ticks: torch.Tensor, step: float,
                     v: torch.Tensor) -> torch.Tensor:
        """⌊v + step·tick⌋ with v = |seg|·multiplier, as floats in ``v`` (a buffer like seg), which it returns. With the
        ticks uniform, this is ⌊v⌋ + 1 with probability frac(v), so its mean is v (to the offsets' resolution, see
        rows.rounding_ticks). The level ξ is it clamped at s (``_clamped``), which keeps a lone entry whose level
        rounding pushed a hair above s encodable in B bits."""
        return torch.abs(seg, out=v).mul_(multiplier).add_(ticks, alpha=step).floor_()

    def _clamped(self, rounded: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        """The levels ξ ≤ s, as integers in ``level``: the floats converted (v ≥ 0: truncation is the floor), then
        clamped in the integer type (s = 65,535 overflows float16)."""
        return level.copy_(rounded).clamp_(max=self.levels)

    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        multiplier, scale = self._multiplier_and_scale(seg)
        ticks, step = draw_rounding(source, seg.shape[0], seg.shape[1], seg.dtype, seg.device)
        level = torch.empty(seg.shape, dtype=_level_dtype(self.levels), device=seg.device)
        v = torch.empty(seg.shape, dtype=seg.dtype, device=seg.device)
        self._clamped(self._levels_into(seg, multiplier, ticks, step, v), level)
        # The sign bits are materialised only when the message goes on a wire (wire_parts).
        return {"scale": scale, "level": level, "sign_of": seg}

    def wire_parts(self, parts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if "sign_of" not in parts:
            return parts
        sent = {key: value for key, value in parts.items() if key != "sign_of"}
        return {**sent, "negative": torch.signbit(parts["sign_of"])}

    def _decode_segment(self, parts: dict[str, torch.Tensor], d: int) -> torch.Tensor:
        # ±(ξ·scale) equals the textbook ξ·sign(x)·scale bit for bit: negation is exact and
        # entries with x = 0 have ξ = 0 (their sign, and so that of the zero they decode to, is moot).
        scale = parts["scale"]
        magnitude = parts["level"].to(scale.dtype) * scale
        if "sign_of" in parts:
            return magnitude.copysign_(parts["sign_of"])
        return torch.where(parts["negative"].bool(), -magnitude, magnitude)

    def _decode_segment_into(self, parts: dict[str, torch.Tensor], d: int, out: torch.Tensor) -> None:
        if "sign_of" in parts:
            # the integer levels into the floats, then the scale: torch's mixed-type product is a slow scalar loop
            out.copy_(parts["level"]).mul_(parts["scale"]).copysign_(parts["sign_of"])
        else:
            out.copy_(self._decode_segment(parts, d))

    def wire_fields(self, d: int) -> tuple[WireField, ...]:
        return (WireField("scale", 1, 32, True), WireField("level", d, self.bits, False),
                WireField("negative", d, 1, False))

    def _segment_paper_bits(self, d: int) -> float:
        return float(self.bits * d)

    def delta(self, d: int) -> float | None:
        # Biased form: E‖Q/τ − x‖² = E‖Q‖²/τ² − ‖x‖²(2/τ − 1) ≤ (1 − 1/τ)‖x‖² since E‖Q‖² ≤ τ‖x‖².
        return 1.0 / self.tau(d) if self.biased else None

    def describe(self) -> dict:
        return {**super().describe(), "levels": self.levels}
