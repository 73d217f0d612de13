"""Compression randomness that does not depend on how the ``[n, d]`` worker stack is split across
processes: a process holding rows lo..hi draws the full stack's tensor and keeps its own rows."""
from __future__ import annotations

from typing import Union

import numpy as np
import torch

from ..errors import BenchError
from .scratch import temporary

SEED_BOUND = 2**32  # rand-k seeds are 32-bit, the width they take on the wire
ROUNDING_BITS = 16  # random bits per entry of a stochastic rounding on a CPU (draw_rounding)
NUMPY_TICKS = 1 << 13  # above this many entries in the stack, draw_rounding's ticks come from numpy (cheaper from ~10⁴)


class RowStream:
    """A generator seen through the rows ``lo:hi`` of a ``total_rows`` stack. Every draw makes the
    whole ``[total_rows, ...]`` tensor, so n processes with the same seed and the same sequence of
    calls get exactly the slices of the single-process simulation's draws (at the price of
    drawing n times as many numbers, which is cheap next to a gradient)."""

    def __init__(self, generator: torch.Generator, total_rows: int, lo: int, hi: int):
        if not 0 <= lo < hi <= total_rows:
            raise BenchError(f"rows {lo}..{hi} are not a non-empty range inside 0..{total_rows}")
        self.generator = generator
        self.total_rows = total_rows
        self.lo, self.hi = lo, hi

    @property
    def rows(self) -> int:
        return self.hi - self.lo

    def _full_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if not shape or shape[0] != self.rows:
            raise BenchError(f"draw shaped {tuple(shape)} does not start with this stream's {self.rows} rows "
                             f"({self.lo}..{self.hi} of {self.total_rows})")
        return (self.total_rows, *shape[1:])

    def rand(self, shape: tuple[int, ...], dtype: torch.dtype | None = None,
             device: torch.device | str | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
        """Uniforms on [0, 1) shaped like ``shape`` (local rows first); ``out``, when given, holds the whole
        stack's draw (shaped like it), the same numbers."""
        full_shape = self._full_shape(tuple(shape))
        if out is None:
            full = torch.rand(full_shape, generator=self.generator, dtype=dtype, device=device)
        else:
            full = torch.rand(full_shape, generator=self.generator, out=out)
        return full[self.lo : self.hi]

    def randint(self, high: int, shape: tuple[int, ...], device: torch.device | str | None = None) -> torch.Tensor:
        """int64 integers in [0, high) shaped like ``shape`` (local rows first)."""
        full = torch.randint(0, high, self._full_shape(tuple(shape)), generator=self.generator,
                             dtype=torch.int64, device=device)
        return full[self.lo : self.hi]


# What compress accepts as its source of randomness: None means torch's global generator.
RandomSource = Union[torch.Generator, RowStream, None]


def draw_uniform(source: RandomSource, rows: int, d: int, dtype: torch.dtype,
                 device: torch.device | str) -> torch.Tensor:
    """Uniforms ``[rows, d]``; a plain generator draws exactly what ``torch.rand`` always drew, into a lent
    buffer where the caller lends one (bench/compressors/scratch.py: the same numbers)."""
    if isinstance(source, RowStream):
        return source.rand((rows, d), out=temporary("uniform", (source.total_rows, d), dtype, device))
    return torch.rand((rows, d), generator=source, out=temporary("uniform", (rows, d), dtype, device))


def draw_rounding(source: RandomSource, rows: int, d: int, dtype: torch.dtype,
                  device: torch.device | str) -> tuple[torch.Tensor, float]:
    """Offsets for stochastic rounding, ``(ticks [rows, d], step)``: ⌊v + step·tick⌋ is ⌊v⌋ + 1 with probability
    frac(v), to the resolution of the offsets. On a CPU the ticks of ``rounding_ticks`` as floats (at least float32,
    so each is exact), step 2^-16; elsewhere ``torch.rand`` of the device's generator, step 1."""
    if torch.device(device).type != "cpu":
        return draw_uniform(source, rows, d, dtype, device), 1.0
    ticks, step = rounding_ticks(source, rows, d)
    floats = temporary("ticks", (rows, d), torch.promote_types(dtype, torch.float32), device)
    return floats.copy_(ticks), step


def rounding_ticks(source: RandomSource, rows: int, d: int) -> tuple[torch.Tensor, float]:
    """A CPU's rounding offsets as integers, ``(ticks [rows, d], 2^-16)``: each tick 0 ≤ t < 2^16, so rounding up has
    probability ⌊2^16·frac(v)⌋/2^16, within 2^-16 below frac(v) (torch.rand's float32 uniforms came within 2^-24, at
    five times the time). A stack of more than ``NUMPY_TICKS`` entries takes its 16 random bits per entry from numpy's
    SFC64, four to a 64-bit word, seeded by one 62-bit draw of ``source`` (a uint16 view of numpy's words); a smaller
    one from ``source`` itself (torch.randint, int32), where numpy's set-up would cost more than the draw
    (docs/performance.md, "QSGD's rounding"). Either way a checkpoint of the run's generator fixes every later
    draw, and a RowStream's processes all draw the stack's ticks and keep their rows."""
    generator = source.generator if isinstance(source, RowStream) else source
    total, lo = (source._full_shape((rows, d))[0], source.lo) if isinstance(source, RowStream) else (rows, 0)
    step = 2.0 ** -ROUNDING_BITS
    if total * d <= NUMPY_TICKS:
        whole = torch.randint(0, 2**ROUNDING_BITS, (total, d), generator=generator, dtype=torch.int32)
        return whole[lo:lo + rows], step
    seed = int(torch.randint(0, 2**62, (), generator=generator))
    per_word = 64 // ROUNDING_BITS
    words = -(-d // per_word)  # each row starts on a fresh 64-bit word
    raw = np.random.SFC64(seed).random_raw(total * words)
    return torch.from_numpy(raw).view(torch.uint16).view(total, words * per_word)[lo:lo + rows, :d], step


def draw_seeds(source: RandomSource, rows: int, device: torch.device | str) -> torch.Tensor:
    """One 32-bit seed per row, int64 ``[rows]`` in [0, 2^32)."""
    if isinstance(source, RowStream):
        return source.randint(SEED_BOUND, (rows,), device=device)
    return torch.randint(0, SEED_BOUND, (rows,), generator=source, dtype=torch.int64, device=device)
