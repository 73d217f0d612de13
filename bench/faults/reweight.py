"""What a receiver does with the links that delivered, under D-PSGD's rule: the weight w_ij of a message
that did not arrive stays on the receiver's own model (w_ii += w_ij), so every row of the round's matrix
still sums to 1 and the receiver averages only what it has. When each loss is symmetric (an edge loses
both directions together) the matrix stays symmetric, so its columns sum to 1 too and the average of the
models is kept; a loss in one direction only moves the average (tests/test_faults.py measures both).

Under pairwise gossip (``faults.pairwise``) the round's two workers average exactly, as Boyd, Ghosh, Prabhakar
and Shah (2006) set it, x_i = x_j = (x_i + x_j)/2: each of the edge's links carries 1/2 instead of the graph's
w_ij, and a lost direction leaves its receiver's model as it was."""
from __future__ import annotations

import numpy as np

from ..topology.links import Links


PAIR_WEIGHT = 0.5  # pairwise gossip: each worker of the round's edge takes half of the other's model


def delivered_weights(links: Links, delivered: np.ndarray, pairwise: bool = False) -> np.ndarray:
    """[E] the weight each link carries this round: w_ij (1/2 under pairwise gossip) where it delivered, 0 where
    it lost its message or (pairwise) sent none."""
    return np.where(np.asarray(delivered, dtype=bool), PAIR_WEIGHT if pairwise else links.weight, 0.0)


def reweighted(W: np.ndarray, links: Links, delivered: np.ndarray, pairwise: bool = False) -> np.ndarray:
    """The round's mixing matrix after losses: W with each lost link's weight moved to its receiver's diagonal;
    under pairwise gossip the identity but for the round's edge, whose delivered directions carry 1/2."""
    if pairwise:
        out = np.eye(len(W))
        kept = np.asarray(delivered, dtype=bool)
        out[links.dst[kept], links.src[kept]] = PAIR_WEIGHT
        np.add.at(out, (links.dst[kept], links.dst[kept]), -PAIR_WEIGHT)
        return out
    W = np.array(W, dtype=np.float64, copy=True)
    lost = ~np.asarray(delivered, dtype=bool)
    dst, src, w = links.dst[lost], links.src[lost], links.weight[lost]
    W[dst, src] = 0.0
    np.add.at(W, (dst, dst), w)
    return W
