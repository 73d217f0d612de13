"""Compression randomness that does not depend on how the ``[n, d]`` worker stack is split across
processes: a process holding rows lo..hi draws the full stack's tensor and keeps its own rows."""
from __future__ import annotations

from typing import Union

import torch

from ..errors import BenchError
from .scratch import temporary

SEED_BOUND = 2**32  # rand-k seeds are 32-bit, the width they take on the wire


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


def draw_seeds(source: RandomSource, rows: int, device: torch.device | str) -> torch.Tensor:
    """One 32-bit seed per row, int64 ``[rows]`` in [0, 2^32)."""
    if isinstance(source, RowStream):
        return source.randint(SEED_BOUND, (rows,), device=device)
    return torch.randint(0, SEED_BOUND, (rows,), generator=source, dtype=torch.int64, device=device)
