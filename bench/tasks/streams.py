"""Counter-based random numbers for training-time randomness (augmentation, dropout masks).

Every draw is a pure function of (seed, epoch, step, worker, purpose, element index), computed
by an integer hash on the device for all workers at once. A process holding workers lo..hi-1
therefore draws exactly what the single-process simulation draws for those workers, a resumed
run draws what an uninterrupted one does, and no per-worker generator or host loop is needed.
"""
from __future__ import annotations

import torch

MASK32 = 0xFFFFFFFF
_MUL = 0x45D9F3B  # odd 27-bit multiplier: a product with a 32-bit value stays below 2^59 in int64
_GOLDEN = 0x9E3779B1

# purposes: one independent stream per kind of randomness
AUGMENT = 1
DROPOUT = 2


def seed_from(*parts: int) -> int:
    """One 63-bit key from integer parts (order matters)."""
    value = 0x9E3779B9
    for p in parts:
        value = (value * 1_000_003 + int(p) + 1) % (2**63 - 1)
    return value


def _mix(h: torch.Tensor) -> torch.Tensor:
    """A 32-bit avalanche hash of int64 tensors holding values in [0, 2^32)."""
    h = (((h >> 16) ^ h) * _MUL) & MASK32
    h = (((h >> 16) ^ h) * _MUL) & MASK32
    return (h >> 16) ^ h


def worker_keys(seed: int, epoch: int, step: int, workers: range, purpose: int,
                device: torch.device | str = "cpu") -> torch.Tensor:
    """``[w]`` int64 keys, one per (global) worker index."""
    return torch.tensor([seed_from(seed, epoch, step, worker, purpose) for worker in workers],
                        dtype=torch.int64, device=device)


def uniform(keys: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """``[len(keys), *shape]`` float32 uniform in [0, 1): element j of row i hashes (keys[i], j)."""
    count = 1
    for s in shape:
        count *= int(s)
    j = torch.arange(count, dtype=torch.int64, device=keys.device)
    lo, hi = keys & MASK32, (keys >> 32) & MASK32
    h = _mix(((j * _GOLDEN) & MASK32)[None, :] ^ lo[:, None])
    h = _mix(h ^ hi[:, None])
    # 24 bits: every value is exact in float32 and strictly below 1
    return ((h >> 8).to(torch.float32) * 2.0**-24).view(len(keys), *shape)

