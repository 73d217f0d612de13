"""Random-k's subsets: the k positions out of d that a 32-bit seed stands for, per row, the same on every device
and in every process (a receiver regenerates them from the seed on the wire).

Each position gets the key mix(mix(mix(seed) + 0x9E3779B9·pos) ^ seed), MurmurHash3's finaliser ``mix`` on 32-bit
integers; for a fixed seed every step is a bijection, so a row's d keys are distinct and its k largest keys are one
subset. On the CPU, for long rows keeping few entries, the keys are hashed by numpy in uint32 a block of a row at
a time, in the cache, and only those above a threshold that about 2k + 64 of them pass are kept as candidates: the
same subset as hashing every key into int64 tensors and taking their top k, in a fifteenth of the time (2.2 s
against 0.14 s on two threads for 64 rows of 10⁶ keeping 1 %, docs/performance.md).
"""
from __future__ import annotations

import numpy as np
import torch

from .halves import in_halves

_MASK32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9
# the CPU path: rows at least this long keeping at most this fraction (where it was the faster on a 2-core CPU:
# 16 x 200,000 keeping 10 %, 25 against 47 ms; keeping 30 %, 66 against 56 ms; 64 x 4,000, 2.7 against 2.3 ms),
# hashed this many keys at a time
_CANDIDATE_MIN_D, _CANDIDATE_MAX_FRACTION, _KEY_BLOCK = 8192, 0.15, 1 << 17
# from this many keys in all, the rows are split between two threads (numpy releases the GIL in its loops)
_SPLIT_KEYS = 1 << 22


def _mul32_(x: torch.Tensor, c: int) -> torch.Tensor:
    """x ← x·c mod 2^32, in place, for int64 x in [0, 2^32). A c ≥ 2^31 is replaced by c − 2^32 (the
    same residue) so |x·c| < 2^63: no int64 overflow, which is not something to lean on across
    devices; the mask of a negative product is still its two's-complement residue."""
    return x.mul_(c - 2**32 if c >= 2**31 else c).bitwise_and_(_MASK32)


def _mix32_(x: torch.Tensor) -> torch.Tensor:
    """x ← MurmurHash3's finaliser of x, in place: a bijection of [0, 2^32) with full avalanche. x ≥ 0,
    so the int64 right shifts are the logical shifts the 32-bit original uses. In place, one temporary a
    shift: the hash of every position of every row is most of a random-k compression's time."""
    x ^= x >> 16
    _mul32_(x, 0x85EBCA6B)
    x ^= x >> 13
    _mul32_(x, 0xC2B2AE35)
    x ^= x >> 16
    return x


def _seeded_indices_torch(seeds: torch.Tensor, d: int, k: int) -> torch.Tensor:
    """``seeded_indices`` on any device: every key of every row hashed in int64 tensors, then their top k."""
    seeds = seeds.reshape(-1, 1).long()
    position = _mul32_(torch.arange(d, device=seeds.device, dtype=torch.int64), _GOLDEN)
    keys = position + _mix32_(seeds.clone())  # [rows, d]: the one row-sized tensor, hashed in place
    keys.bitwise_and_(_MASK32)
    _mix32_(keys)
    keys ^= seeds
    _mix32_(keys)
    return keys.topk(k, dim=1, sorted=False).indices.sort(dim=1).values


def seeded_indices(seeds: torch.Tensor, d: int, k: int) -> torch.Tensor:
    """The k positions out of d that each row's 32-bit seed stands for: int64 [rows, k], sorted (the order in which
    the values travel). The k largest keys form a uniformly random subset as far as the hash is random."""
    if seeds.device.type == "cpu" and d >= _CANDIDATE_MIN_D and k <= _CANDIDATE_MAX_FRACTION * d:
        return _seeded_indices_candidates(seeds, d, k)
    return _seeded_indices_torch(seeds, d, k)


def _mix32_np(x: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """``_mix32_`` on uint32 ``x`` in place (numpy's uint32 products wrap modulo 2^32), ``scratch`` as large."""
    np.right_shift(x, 16, out=scratch)
    x ^= scratch
    x *= np.uint32(0x85EBCA6B)
    np.right_shift(x, 13, out=scratch)
    x ^= scratch
    x *= np.uint32(0xC2B2AE35)
    np.right_shift(x, 16, out=scratch)
    x ^= scratch
    return x


def _threshold(d: int, k: int) -> np.uint32:
    """A key that about 2k + 64 of a row's d keys reach: fewer than k reach it only 8 or more standard deviations
    below the mean of that binomial count, for every k (a row then takes its k largest from all its keys)."""
    return np.uint32(max(0, (1 << 32) - ((2 * k + 64) << 32) // d))


def _seeded_indices_candidates(seeds: torch.Tensor, d: int, k: int) -> torch.Tensor:
    """``_seeded_indices_torch``'s subsets, the keys hashed in uint32 a block at a time and only those at or above a
    threshold kept: a row's k largest keys are all among them whenever at least k pass (about 2k + 64 do, the keys
    being spread evenly over [0, 2^32)); a row where fewer pass takes its k largest from all its keys."""
    seeds32 = seeds.reshape(-1).cpu().numpy().astype(np.uint64).astype(np.uint32)  # 0 <= seed < 2^32
    rows = seeds32.shape[0]
    position = np.arange(d, dtype=np.uint32)
    position *= np.uint32(_GOLDEN)
    base = _mix32_np(seeds32.copy(), np.empty_like(seeds32))
    threshold = _threshold(d, k)
    out = np.empty((rows, k), dtype=np.int64)

    def row_keys(r: int, start: int, stop: int, keys: np.ndarray, scratch: np.ndarray) -> np.ndarray:
        keys = keys[: stop - start]
        np.add(position[start:stop], base[r], out=keys)
        _mix32_np(keys, scratch[: stop - start])
        keys ^= seeds32[r]
        return _mix32_np(keys, scratch[: stop - start])

    def work(lo: int, hi: int) -> None:
        keys, scratch = np.empty(min(_KEY_BLOCK, d), np.uint32), np.empty(min(_KEY_BLOCK, d), np.uint32)
        for r in range(lo, hi):
            columns, values = [], []
            for start in range(0, d, _KEY_BLOCK):
                block = row_keys(r, start, min(start + _KEY_BLOCK, d), keys, scratch)
                passed = np.flatnonzero(block >= threshold)
                columns.append(passed + start)
                values.append(block[passed])
            columns, values = np.concatenate(columns), np.concatenate(values)
            if len(values) < k:  # fewer than k passed (rare): all of the row's keys
                columns = np.arange(d)
                values = np.concatenate([row_keys(r, s, min(s + _KEY_BLOCK, d), keys, scratch).copy()
                                         for s in range(0, d, _KEY_BLOCK)])
            top = np.argpartition(values, len(values) - k)[len(values) - k:]
            out[r] = np.sort(columns[top])

    in_halves(work, rows, rows * d >= _SPLIT_KEYS)
    return torch.from_numpy(out).to(seeds.device)
