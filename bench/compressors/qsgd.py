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
from typing import ClassVar

import torch

from ..catalog import compressors as catalog
from .base import Compressor, WireField, register
from .rows import RandomSource, draw_rounding, rounding_ticks
from .scratch import BLOCK_COLUMNS, column_blocks, temporary


def _level_dtype(levels: int) -> torch.dtype:
    """The narrowest integer type holding 0..levels + 1 (a level before its clamp): a message's level indices take
    a quarter of float32's memory up to 7 bits."""
    return torch.uint8 if levels < 255 else torch.int32


@register
class QSGD(catalog.QSGD, Compressor):
    stochastic: ClassVar[bool] = True

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

    def _round_into(self, seg: torch.Tensor, multiplier: torch.Tensor, ticks: torch.Tensor, step: float,
                    v: torch.Tensor, level: torch.Tensor) -> None:
        """``level`` ← ξ = ⌊v + step·tick⌋ with v = |seg|·multiplier computed in ``v``, a buffer like seg. With the
        ticks uniform, ξ is ⌊v⌋ + 1 with probability frac(v), so E[ξ] = v (to the offsets' resolution, see
        rows.rounding_ticks). v ≥ 0, so the integer conversion's truncation is the floor; ⌊v⌋ ≤ s + 1 fits the
        level's type, and the clamp keeps a lone entry whose level rounding pushed a hair above s encodable in B bits."""
        torch.abs(seg, out=v).mul_(multiplier).add_(ticks, alpha=step)
        level.copy_(v).clamp_(max=self.levels)

    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        multiplier, scale = self._multiplier_and_scale(seg)
        ticks, step = draw_rounding(source, seg.shape[0], seg.shape[1], seg.dtype, seg.device)
        level = torch.empty(seg.shape, dtype=_level_dtype(self.levels), device=seg.device)
        self._round_into(seg, multiplier, ticks, step, temporary("v", tuple(seg.shape), seg.dtype, seg.device), level)
        # The sign bits are materialised only when the message goes on a wire (wire_parts).
        return {"scale": scale, "level": level, "sign_of": seg}

    def _compress_segment_into(self, seg: torch.Tensor, source: RandomSource,
                               out: torch.Tensor) -> dict[str, torch.Tensor]:
        """On a CPU, a long segment is rounded and decoded a block of ``BLOCK_COLUMNS`` columns at a time: |x|, the
        offsets as floats, the levels and the values of a block are made while it is in the cache, instead of seven
        passes over the whole state in memory (docs/performance.md, "QSGD's rounding"). The same operations on every
        entry as ``_compress_segment`` then ``_decode_segment_into``, so the same parts and values bit for bit."""
        w, d = seg.shape
        if seg.device.type != "cpu" or d <= BLOCK_COLUMNS:
            return super()._compress_segment_into(seg, source, out)
        multiplier, scale = self._multiplier_and_scale(seg)
        ticks, step = rounding_ticks(source, w, d)
        level = torch.empty(seg.shape, dtype=_level_dtype(self.levels), device=seg.device)
        v = temporary("v", (w, BLOCK_COLUMNS), seg.dtype, seg.device)
        floats = temporary("ticks", (w, BLOCK_COLUMNS), torch.promote_types(seg.dtype, torch.float32), seg.device)
        for columns, width in column_blocks(d):
            block = seg[:, columns]
            self._round_into(block, multiplier, floats[:, :width].copy_(ticks[:, columns]), step, v[:, :width],
                             level[:, columns])
            self._decode_segment_into({"scale": scale, "level": level[:, columns], "sign_of": block}, width,
                                      out[:, columns])
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
