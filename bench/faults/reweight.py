"""What a receiver does with the links that delivered, under D-PSGD's rule: the weight w_ij of a message
that did not arrive stays on the receiver's own model (w_ii += w_ij), so every row of the round's matrix
still sums to 1 and the receiver averages only what it has. When each loss is symmetric (an edge loses
both directions together) the matrix stays symmetric, so its columns sum to 1 too and the average of the
models is kept; a loss in one direction only moves the average (tests/test_faults.py measures both)."""
from __future__ import annotations

import numpy as np

from ..topology.links import Links


def delivered_weights(links: Links, delivered: np.ndarray) -> np.ndarray:
    """[E] the weight each link carries this round: w_ij where it delivered, 0 where it lost its message."""
    return np.where(np.asarray(delivered, dtype=bool), links.weight, 0.0)


def reweighted(W: np.ndarray, links: Links, delivered: np.ndarray) -> np.ndarray:
    """The round's mixing matrix after losses: W with each lost link's weight moved to its receiver's diagonal."""
    W = np.array(W, dtype=np.float64, copy=True)
    lost = ~np.asarray(delivered, dtype=bool)
    dst, src, w = links.dst[lost], links.src[lost], links.weight[lost]
    W[dst, src] = 0.0
    np.add.at(W, (dst, dst), w)
    return W
