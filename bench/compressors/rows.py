"""Compression randomness that does not depend on how the ``[n, d]`` worker stack is split across
processes: a process holding rows lo..hi draws the full stack's tensor and keeps its own rows."""
from __future__ import annotations

import threading
from typing import Union

import numpy as np
import torch

from ..errors import BenchError

SEED_BOUND = 2**32  # rand-k seeds are 32-bit, the width they take on the wire
ROUNDING_BITS = 16  # random bits per entry of a stochastic rounding on a CPU (draw_rounding)
NUMPY_TICKS = 1 << 13  # above this many entries in the stack, draw_rounding's ticks come from numpy (cheaper from ~10⁴)
SPLIT_WORDS = 1 << 20  # from this many 64-bit words of ticks (4 M entries), two numpy streams drawn on two threads


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
             device: torch.device | str | None = None) -> torch.Tensor:
        """Uniforms on [0, 1) shaped like ``shape`` (local rows first)."""
        full = torch.rand(self._full_shape(tuple(shape)), generator=self.generator, dtype=dtype, device=device)
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
    """Uniforms ``[rows, d]``; a plain generator draws exactly what ``torch.rand`` always drew."""
    if isinstance(source, RowStream):
        return source.rand((rows, d), dtype=dtype, device=device)
    return torch.rand((rows, d), generator=source, dtype=dtype, device=device)


def draw_rounding(source: RandomSource, rows: int, d: int, dtype: torch.dtype,
                  device: torch.device | str) -> tuple[torch.Tensor, float]:
    """Offsets for stochastic rounding, ``(ticks [rows, d], step)``: ⌊v + step·tick⌋ is ⌊v⌋ + 1 with probability
    frac(v), to the resolution of the offsets. On a CPU the ticks of ``rounding_ticks`` as floats (at least float32,
    so each is exact), step 2^-16; elsewhere ``torch.rand`` of the device's generator, step 1."""
    if torch.device(device).type != "cpu":
        return draw_uniform(source, rows, d, dtype, device), 1.0
    ticks, step = rounding_ticks(source, rows, d)
    floats = torch.empty((rows, d), dtype=torch.promote_types(dtype, torch.float32), device=device)
    return ticks.copy_into(floats), step


class Ticks:
    """A stack's rounding offsets as 16-bit integers, held in row chunks ``(local rows, ticks [len, d])`` that cover
    the local rows in order (one chunk per numpy stream the rows came from)."""

    def __init__(self, chunks: list[tuple[slice, torch.Tensor]]):
        self.chunks = chunks

    def copy_into(self, out: torch.Tensor) -> torch.Tensor:
        """``out`` [rows, d] ← the ticks (converted to out's type), returned."""
        for rows, ticks in self.chunks:
            out[rows].copy_(ticks)
        return out


def rounding_ticks(source: RandomSource, rows: int, d: int) -> tuple[Ticks, float]:
    """A CPU's rounding offsets as integers, ``(ticks, 2^-16)``: each tick 0 ≤ t < 2^16, so rounding up has probability
    ⌊2^16·frac(v)⌋/2^16, within 2^-16 below frac(v) (torch.rand's float32 uniforms came within 2^-24, at five times the
    time). A stack of more than ``NUMPY_TICKS`` entries takes its 16 random bits per entry from numpy's SFC64, four to
    a 64-bit word, seeded by one 62-bit draw of ``source``; a smaller one from ``source`` itself (torch.randint, int32),
    where numpy's set-up would cost more than the draw (docs/performance.md, "QSGD's rounding"). From
    ``SPLIT_WORDS`` words on, the first half of the stack's rows and the second come from two streams (numpy's
    SeedSequence of that seed, spawned in two), drawn at once on two threads (numpy lets go of the GIL while it
    draws): which stream a row takes depends on the stack's size alone, never on the machine. Either way a checkpoint
    of the run's generator fixes every later draw, and a RowStream's processes get the rows of the stack's draw (each
    draws only the streams, and the part of each, that reach its rows)."""
    generator = source.generator if isinstance(source, RowStream) else source
    total, lo = (source._full_shape((rows, d))[0], source.lo) if isinstance(source, RowStream) else (rows, 0)
    hi = lo + rows
    step = 2.0 ** -ROUNDING_BITS
    if total * d <= NUMPY_TICKS:
        whole = torch.randint(0, 2**ROUNDING_BITS, (total, d), generator=generator, dtype=torch.int32)
        return Ticks([(slice(0, rows), whole[lo:hi])]), step
    seed = int(torch.randint(0, 2**62, (), generator=generator))
    per_word = 64 // ROUNDING_BITS
    words = -(-d // per_word)  # each row starts on a fresh 64-bit word
    if total < 2 or total * words < SPLIT_WORDS:
        spans = [(0, total, seed)]
    else:
        half = total // 2
        first, second = np.random.SeedSequence(seed).spawn(2)
        spans = [(0, half, first), (half, total, second)]
    spans = [span for span in spans if span[0] < hi and span[1] > lo]  # the streams that reach our rows
    # a stream's words up to the last of our rows (the rows before ours are drawn and dropped: a stream is sequential)
    raws = _draw_at_once([(stream, (min(end, hi) - start) * words) for start, end, stream in spans])
    chunks = []
    for (start, end, _), raw in zip(spans, raws):
        ticks = torch.from_numpy(raw).view(torch.uint16).view(-1, words * per_word)
        first_row = max(start, lo)
        chunks.append((slice(first_row - lo, min(end, hi) - lo), ticks[first_row - start:, :d]))
    return Ticks(chunks), step


def _draw_at_once(jobs: list[tuple]) -> list[np.ndarray]:
    """``SFC64(seed).random_raw(count)`` for each (seed, count): the last on this thread, the others on threads of
    their own, all at once (a thread per call: no pool to outlive a fork)."""
    raws: list[np.ndarray | None] = [None] * len(jobs)

    def draw(i: int) -> None:
        seed, count = jobs[i]
        raws[i] = np.random.SFC64(seed).random_raw(count)

    helpers = [threading.Thread(target=draw, args=(i,)) for i in range(len(jobs) - 1)]
    for helper in helpers:
        helper.start()
    draw(len(jobs) - 1)
    for helper in helpers:
        helper.join()
    return raws


def draw_seeds(source: RandomSource, rows: int, device: torch.device | str) -> torch.Tensor:
    """One 32-bit seed per row, int64 ``[rows]`` in [0, 2^32)."""
    if isinstance(source, RowStream):
        return source.randint(SEED_BOUND, (rows,), device=device)
    return torch.randint(0, SEED_BOUND, (rows,), generator=source, dtype=torch.int64, device=device)
