"""How many intra-op threads a run's process uses.

torch runs an operation on several threads where it is large enough to split (its own element-wise kernels
from 2¹⁵ entries; a batched product over its batch), and every such operation forks and joins them. On a
problem whose every tensor is small (the convex tasks' least squares and logistic regression at the sizes
optimisation studies run by the thousand) that costs more than the arithmetic, and much more on a busy
machine, where a thread waiting at the join has been descheduled (docs/performance.md, "Per-step cost").
Such a run takes one thread. The results are the same bits either way (tests/test_threads.py runs a small
problem both ways). A thread count the user set (OMP_NUM_THREADS, as the pipeline and `bench track` set it)
is kept."""
from __future__ import annotations

import os
from typing import Mapping

import torch

# entries of the largest tensor of a run (bench.tasks.Task.largest_tensor) up to which it takes one thread. Measured
# on 2 cores (docs/performance.md, "Per-step cost"): group h's least squares at n = 8 (batches of 8 × 125 × 20
# = 20,000 entries) steps in 137 µs with one thread and 164 µs with two; at n = 64 (64 × 16 × 200 = 204,800) in
# 395 µs with one and 317 µs with two
SMALL = 1 << 16


def settle(largest: int | None, environ: Mapping[str, str] = os.environ) -> str:
    """Set this process's intra-op threads for a run whose largest tensor has ``largest`` entries (None: not
    known); returns why, for run.json."""
    if environ.get("OMP_NUM_THREADS"):
        return "OMP_NUM_THREADS"
    if largest is None or largest > SMALL:
        return "torch's default" if largest is None else f"largest tensor {largest} entries > {SMALL}: torch's default"
    torch.set_num_threads(1)
    return f"largest tensor {largest} entries <= {SMALL}: one thread"
