"""Buffers a caller lends an operator for the temporaries of its compression.

A [64, 10⁶] float32 temporary made anew every round is 65,536 fresh pages (glibc maps any block above 32 MB on
its own and unmaps it when it is freed), page-faulted in again each round: top-k's |x| and candidate mask
and QSGD's fractional parts and uniforms cost more in faults than in arithmetic (docs/performance.md, "What a
round's fresh tensors cost"). A method holds one ``Scratch`` and lends it while it compresses
(``Algorithm._compress``); an operator asks ``temporary`` for what it drops before it returns, and gets a
buffer of that name and shape kept from the last round, or a fresh tensor where nothing is lent. Only what
compress drops may live there: a message's parts are the caller's, and never scratch."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

import torch

# Columns a CPU compressor works through at a time when it passes over a long segment several times (sign's L1 norm,
# QSGD's rounding and decode): [64, 16,384] float32 is 4 MB, in the cache between passes. At most torch's grain of
# 32,768 entries, so one row's block is reduced on one thread (sign.l1_norm relies on it).
BLOCK_COLUMNS = 1 << 14

_lent: ContextVar["Scratch | None"] = ContextVar("scratch", default=None)


class Scratch:
    """The buffers one caller lends, one per (name, shape, dtype, device): a per-layer compression keeps one
    for each layer's shape, as many entries as the state in all."""

    def __init__(self) -> None:
        self._held: dict[tuple, torch.Tensor] = {}

    def empty(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device) -> torch.Tensor:
        key = (name, tuple(shape), dtype, torch.device(device))
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = torch.empty(shape, dtype=dtype, device=device)
        return held

    @contextmanager
    def lent(self) -> Iterator[None]:
        token = _lent.set(self)
        try:
            yield
        finally:
            _lent.reset(token)


def temporary(name: str, shape: tuple[int, ...], dtype: torch.dtype, device) -> torch.Tensor:
    """An uninitialised tensor for a temporary of compress: the lent buffer of that name and shape, or a fresh
    one where no scratch is lent."""
    scratch = _lent.get()
    if scratch is None:
        return torch.empty(shape, dtype=dtype, device=device)
    return scratch.empty(name, shape, dtype, device)


def column_blocks(d: int) -> Iterator[tuple[slice, int]]:
    """The ``BLOCK_COLUMNS``-wide column blocks of a segment of d columns, in order: (columns, width)."""
    for start in range(0, d, BLOCK_COLUMNS):
        yield slice(start, start + BLOCK_COLUMNS), min(BLOCK_COLUMNS, d - start)
