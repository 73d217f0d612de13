"""``sign``: scaled sign (‖x‖₁/d)·sign(x) per row and segment, with sign(0) taken as +1 so that
each entry fits one bit. Biased; δ = ‖x‖₁²/(d‖x‖₂²) depends on the data.

Bits per segment of d entries: paper d + 32, wire d + 32 (one fp32 scale + packed sign bits).
"""
from __future__ import annotations

import torch

from ..catalog import compressors as catalog
from .base import Compressor, WireField, register
from .rows import RandomSource


@register
class Sign(catalog.Sign, Compressor):
    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        # The scale ‖x‖₁/d minimises ‖c·sign(x) − x‖² over c; a zero row gets scale 0, so zeros.
        # Mapping sign(0) to +1 leaves the error at ‖x‖² − ‖x‖₁²/d because 0·(+1) adds nothing to
        # ⟨sign(x), x⟩ = ‖x‖₁.
        # One pass each, no temporaries: the L1 norm, and the sign bit (signbit(-0.0) is set, so -0.0
        # travels as negative; any consistent rule for zeros keeps the error above).
        # The sign bits are only materialised when the message is encoded for the wire (wire_parts);
        # locally the values are copysign(scale, x), which equals the decoding of those bits.
        scale = torch.linalg.vector_norm(seg, ord=1, dim=1, keepdim=True) / seg.shape[1]
        return {"scale": scale, "sign_of": seg}

    def wire_parts(self, parts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if "negative" in parts:
            return parts
        return {"scale": parts["scale"], "negative": torch.signbit(parts["sign_of"])}

    def _decode_segment(self, parts: dict[str, torch.Tensor], d: int) -> torch.Tensor:
        scale = parts["scale"]
        if "sign_of" in parts:
            return torch.copysign(scale, parts["sign_of"])
        return torch.where(parts["negative"].bool(), -scale, scale)

    def _decode_segment_into(self, parts: dict[str, torch.Tensor], d: int, out: torch.Tensor) -> None:
        if "sign_of" in parts:
            torch.copysign(parts["scale"], parts["sign_of"], out=out)
        else:
            out.copy_(self._decode_segment(parts, d))

    def wire_fields(self, d: int) -> tuple[WireField, ...]:
        return (WireField("scale", 1, 32, True), WireField("negative", d, 1, False))

    def _segment_paper_bits(self, d: int) -> float:
        return d + 32.0
