"""The compressor contract (Message, Compressor) and the per-segment plumbing: each layer segment of each row of
``[workers, d]`` is compressed on its own; what a spec says of an operator is spec.py's, its wire layout its module's."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple, Sequence

import torch

from ..errors import BenchError
from .rows import RandomSource
from .spec import OperatorSpec


@dataclass(frozen=True)
class Message:
    """What one round sends, for all local workers at once."""

    values: torch.Tensor  # [w, d]: the decoded payload every receiver adds (dtype/device of the input)
    wire_bits: float  # bits one worker's encoded message needs on the wire (sizes are data-independent)
    paper_bits: float  # the same message under the paper's accounting
    # One dict per segment of what the encoding sends (see ``Compressor.wire_fields``), each
    # tensor [w, count]; ``values`` is decoded from these, so wire.encode can send them exactly.
    parts: tuple[dict[str, torch.Tensor], ...] | None = field(default=None, repr=False, compare=False)
    # how it was encoded, so a distributed communicator can send and decode it without being told
    codec: "Compressor | None" = field(default=None, repr=False, compare=False)
    segments: tuple[int, ...] | None = field(default=None, repr=False, compare=False)


class WireField(NamedTuple):
    """One field of a segment's encoding: ``count`` entries of ``width`` bits each."""

    name: str  # key in the segment's parts
    count: int
    width: int  # bits per entry; 32 for float32 fields
    is_float: bool  # float32 bit pattern (True) or an unsigned integer < 2^width (False)


class Compressor(OperatorSpec):
    """Base of every operator: what its spec fixes (spec.py's ``OperatorSpec``: its knobs as dataclass fields,
    ``from_spec``, ``spec``, ``unbiased``, ``sparse``, ``examples``, its looks in figures), and the encoding.
    Operators define ``_compress_segment`` (segment → parts), ``_decode_segment`` (parts → values),
    ``wire_fields`` (the layout, which fixes the wire bits) and ``_segment_paper_bits``."""

    stochastic: ClassVar[bool] = False  # whether compress draws from the generator
    # whether ``compress(x, out=x)`` is allowed: each value is computed from its own entry of x and from parts taken
    # before any value is written, and the parts stay true of the message once x holds the values (sign: the
    # values carry x's sign bits; none: the values are x). A method that has no use for x after compressing it
    # then needs no buffer of its own for the values, and the values are written where x already sits in the cache
    compresses_in_place: ClassVar[bool] = False

    # -- the maths of one segment ------------------------------------------------------------
    def _compress_segment(self, seg: torch.Tensor, source: RandomSource) -> dict[str, torch.Tensor]:
        """Encode ``seg`` [w, d_seg] row by row into its parts: at least the ``wire_fields`` of
        d_seg, each [w, count] (floats in seg's dtype); never views of seg."""
        raise NotImplementedError

    def wire_parts(self, parts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The fields ``wire_fields`` names, from a segment's parts (an operator may derive some lazily,
        only when a message is really sent)."""
        return parts

    def _compress_segment_into(self, seg: torch.Tensor, source: RandomSource,
                               out: torch.Tensor) -> dict[str, torch.Tensor]:
        """``_compress_segment``, its values written into ``out`` [w, d_seg]."""
        parts = self._compress_segment(seg, source)
        self._decode_segment_into(parts, seg.shape[1], out)
        return parts

    def _decode_segment_into(self, parts: dict[str, torch.Tensor], d: int, out: torch.Tensor) -> None:
        """Write the segment's values into ``out``; operators override it to skip the temporary."""
        out.copy_(self._decode_segment(parts, d))

    def _decode_segment(self, parts: dict[str, torch.Tensor], d: int) -> torch.Tensor:
        """The values [w, d] the parts stand for. Both compress (parts in the input dtype) and
        wire.decode (floats from float32, integers as int64) go through here, so they agree."""
        raise NotImplementedError

    def wire_fields(self, d: int) -> tuple[WireField, ...]:
        """The encoding of one segment of d entries, in wire order."""
        raise NotImplementedError

    def _segment_wire_bits(self, d: int) -> float:
        # Derived from the layout so the bit count and the bytes wire.encode sends cannot drift.
        return float(sum(f.count * f.width for f in self.wire_fields(d)))

    def _segment_paper_bits(self, d: int) -> float:
        raise NotImplementedError

    def delta(self, d: int) -> float | None:
        """Contraction δ of one segment of size d when it does not depend on the data, else None."""
        return None

    # -- the shared plumbing ------------------------------------------------------------------
    def compress(
        self,
        x: torch.Tensor,
        generator: RandomSource = None,
        segments: Sequence[int] | None = None,
        out: torch.Tensor | None = None,
    ) -> Message:
        """``generator`` is a torch.Generator (all rows are local) or a RowStream (rows lo..hi).
        ``out`` (shaped like x) receives the values: a caller compressing every round reuses it
        instead of allocating [w, d] each time; the message's parts may refer to x, so send the
        message before changing x."""
        segments = _check_input(x, segments)
        if out is not None:
            parts = tuple(self._compress_segment_into(seg, generator, piece) for seg, piece in
                          zip(torch.split(x, segments, dim=1), torch.split(out, segments, dim=1)))
            values = out
        else:
            parts = tuple(self._compress_segment(seg, generator) for seg in torch.split(x, segments, dim=1))
            pieces = [self._decode_segment(p, d) for p, d in zip(parts, segments)]
            values = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=1)
        return Message(values=values, wire_bits=self.wire_bits(segments), paper_bits=self.paper_bits(segments),
                       parts=parts, codec=self, segments=tuple(segments))

    def add_message(self, message: Message, target: torch.Tensor) -> torch.Tensor:
        """``target += message.values`` in place (a public copy moved by what it was sent), returned. A sparse operator
        adds only the entries it sends: adding a zero changes no entry except −0.0, which the sum would make +0.0,
        and a copy that starts at +0 never holds −0 (x + y is −0 only when both are), so the bits are the same."""
        return target.add_(message.values)

    def on_support(self, message: Message, values: torch.Tensor) -> Message:
        """A sparse operator's message that sends ``values`` [w, d] at the positions ``message`` sends
        (the same encoding and bits; ``values`` outside them are ignored). Lets a method transmit a
        correction on the coordinates it already chose, as ECD does with sparsifiers."""
        raise NotImplementedError(f"{self.name!r} is not a sparse operator")

    def support(self, message: Message) -> torch.Tensor:
        """Boolean [w, d]: the coordinates a sparse operator's ``message`` sends."""
        raise NotImplementedError(f"{self.name!r} is not a sparse operator")

    def wire_bits(self, segments: Sequence[int] | int) -> float:
        return _bits(self, "wire", tuple(segments) if not isinstance(segments, int) else segments)

    def paper_bits(self, segments: Sequence[int] | int) -> float:
        return _bits(self, "paper", tuple(segments) if not isinstance(segments, int) else segments)

    def describe(self) -> dict[str, Any]:
        knobs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)} if dataclasses.is_dataclass(self) else {}
        # looks(): how figures show it (label, family, legend order, marker), which analysis learns from run.json
        return {"spec": self.spec, "name": self.name, "unbiased": bool(self.unbiased), "form": self.form, **knobs,
                **self.looks()}


def measure_delta(
    comp: Compressor,
    x: torch.Tensor,
    generator: RandomSource,
    segments: Sequence[int] | None = None,
    trials: int = 8,
) -> float:
    """Empirical quality 1 − mean‖Q(x) − x‖² / ‖x‖² over all rows (ratio of sums, so zero rows
    do no harm) and ``trials`` draws; one draw suffices for deterministic operators."""
    total = x.detach().double().pow(2).sum()
    if total == 0:
        raise BenchError("measure_delta needs a non-zero x; the quality of Q at x = 0 is undefined")
    if trials < 1:
        raise BenchError(f"measure_delta trials={trials} must be a positive integer")
    draws = trials if comp.stochastic else 1
    error = sum(
        (comp.compress(x, generator, segments).values - x).double().pow(2).sum() for _ in range(draws)
    )
    return float(1.0 - error / (draws * total))


@lru_cache(maxsize=256)
def _bits(comp: Compressor, kind: str, segments: tuple[int, ...] | int) -> float:
    """A message's bits over ``segments`` (data-independent: worked out once per operator and segments, as a run
    sends the same sizes every round)."""
    per_segment = comp._segment_wire_bits if kind == "wire" else comp._segment_paper_bits
    return float(sum(per_segment(d) for d in _check_segments(segments)))


# -- helpers shared by the operator modules ---------------------------------------------------
def _check_segments(segments: Sequence[int] | int) -> list[int]:
    if isinstance(segments, int):
        segments = [segments]
    out = [int(s) for s in segments]
    if not out or any(s <= 0 or s != orig for s, orig in zip(out, segments)):
        raise BenchError(f"segments {list(segments)!r} must be a non-empty list of positive integers")
    return out


def _check_input(x: torch.Tensor, segments: Sequence[int] | None) -> list[int]:
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise BenchError(f"compress expects a floating tensor shaped [workers, d], got {shape}")
    d = x.shape[1]
    if d == 0:
        raise BenchError("compress needs at least one entry per worker, got d = 0")
    if segments is None:
        return [d]
    out = _check_segments(segments)
    if sum(out) != d:
        raise BenchError(f"segments sum to {sum(out)} but x has d = {d} entries per worker")
    return out
