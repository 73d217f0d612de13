"""``sign``: scaled sign (‖x‖₁/d)·sign(x) per row and segment, with sign(0) taken as +1 so that
each entry fits one bit. Biased; δ = ‖x‖₁²/(d‖x‖₂²) depends on the data.

Bits per segment of d entries: paper d + 32, wire d + 32 (one fp32 scale + packed sign bits).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..specs import Spec
from .base import Compressor, WireField
from .rows import RandomSource
from .spec import reject_arg, register

# The columns of a block of sign's L1 norm on a CPU: [64, 16,384] float32 is 4 MB, in the cache between its two
# passes. At most torch's grain of 32,768 entries, so one row's block is reduced on one thread.
BLOCK_COLUMNS = 1 << 14


def l1_norm(seg: torch.Tensor) -> torch.Tensor:
    """‖row‖₁ of each row of ``seg`` [w, d], shaped [w, 1]. On a CPU: for each block of ``BLOCK_COLUMNS`` columns, |x|
    into a [w, BLOCK_COLUMNS] buffer and torch's pairwise ``sum``, the block sums added in column order. The relative
    error stays near 1e-7 at d = 10⁶, where ``vector_norm(ord=1)`` keeps one running float32 total (1e-4) in a
    scalar loop, 2× slower at 64 × 10⁶ and 4× at 64 × 10⁴; the block stays in the cache between the two passes,
    so a long row is read from memory once (docs/performance.md, "The sign round's L1 norm"). A block is summed
    on one thread, so a row gets the same bits alone as in any stack (the simulator's stack and a rank of
    ``--backend dist`` holding one worker compute the same scales). Elsewhere ``vector_norm``: one pass,
    tree-reduced."""
    if seg.device.type != "cpu":
        return torch.linalg.vector_norm(seg, ord=1, dim=1, keepdim=True)
    w, d = seg.shape
    buffer = torch.empty((w, min(d, BLOCK_COLUMNS)), dtype=seg.dtype, device=seg.device)
    total = None  # a short row is one block
    for start in range(0, d, BLOCK_COLUMNS):
        width = min(BLOCK_COLUMNS, d - start)
        part = torch.abs(seg[:, start:start + width], out=buffer[:, :width]).sum(dim=1, keepdim=True)
        total = part if total is None else total.add_(part)
    return total


@register
@dataclass(frozen=True)
class Sign(Compressor):
    """``sign``: scaled sign, one bit per entry (biased)."""

    name: ClassVar[str] = "sign"
    unbiased: ClassVar[bool] = False
    usage: ClassVar[str] = "sign"
    summary: ClassVar[str] = "scaled sign, one bit an entry"
    examples: ClassVar[tuple[str, ...]] = ("sign",)
    order: ClassVar[int] = 4
    marker: ClassVar[str] = "D"
    compresses_in_place = True  # copysign(scale, x) keeps x's sign bits, which are all "sign_of" is read for

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "Sign":
        reject_arg(spec)
        spec.check_options(set(cls.options))
        return cls()

    @property
    def spec(self) -> str:
        return "sign"

    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        # The scale ‖x‖₁/d minimises ‖c·sign(x) − x‖² over c; a zero row gets scale 0, so zeros.
        # Mapping sign(0) to +1 leaves the error at ‖x‖² − ‖x‖₁²/d because 0·(+1) adds nothing to
        # ⟨sign(x), x⟩ = ‖x‖₁.
        # The sign bit: signbit(-0.0) is set, so -0.0 travels as negative; any consistent rule for zeros
        # keeps the error above. The sign bits are only materialised when the message is encoded for the
        # wire (wire_parts); locally the values are copysign(scale, x), which equals the decoding of those bits.
        return {"scale": l1_norm(seg) / seg.shape[1], "sign_of": seg}

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
