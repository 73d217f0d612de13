"""Random-k's subsets: the k positions out of d that a 32-bit seed stands for, per row, the same on every device
and in every process (a receiver regenerates them from the seed on the wire).

Each position gets the key mix(mix(mix(seed) + 0x9E3779B9·pos) ^ seed), MurmurHash3's finaliser ``mix`` on 32-bit
integers; for a fixed seed every step is a bijection, so a row's d keys are distinct and its k largest keys are one
subset.
"""
from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9


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


def seeded_indices(seeds: torch.Tensor, d: int, k: int) -> torch.Tensor:
    """The k positions out of d that each row's 32-bit seed stands for: int64 [rows, k], sorted (the order in which
    the values travel). Every key of every row hashed in int64 tensors, then their top k: a uniformly random subset
    as far as the hash is random."""
    seeds = seeds.reshape(-1, 1).long()
    position = _mul32_(torch.arange(d, device=seeds.device, dtype=torch.int64), _GOLDEN)
    keys = position + _mix32_(seeds.clone())  # [rows, d]: the one row-sized tensor, hashed in place
    keys.bitwise_and_(_MASK32)
    _mix32_(keys)
    keys ^= seeds
    _mix32_(keys)
    return keys.topk(k, dim=1, sorted=False).indices.sort(dim=1).values

