"""PowerGossip (Vogels, Karimireddy, Jaggi 2020, "PowerGossip: Practical Low-Rank Communication Compression in
Decentralized Deep Learning") in the one configuration a broadcast gossip can express: the authors' code
(epfml/powergossip, ``algorithms.PowerGossip``) with ``synchronized_randomness=True, warm_start=False``.

What PowerGossip does (the authors' code). Each layer's tensor is a matrix ``X`` (``rows × cols``: a tensor
(a, b, …) as a × b·…); 1-D tensors (biases, BatchNorm) are gossiped exactly (``OnlyOnLargeParameters``). For
each edge (i, j) both ends hold the same orthonormal ``P_ij`` (``rows × r`` or ``cols × r``, r = min(rows, cols,
rank)), exchange ``X_i P_ij`` and ``X_j P_ij``, and both apply the rank-r approximation of their difference:
``X_i ← X_i + γ Σ_j w_ij (X_j − X_i) P_ij P_ijᵀ`` (rounds alternate with ``P_ijᵀ (X_j − X_i)`` on the left).
Warm start (the authors' default) makes the next ``P_ij`` the received difference itself — one power iteration per
round, per edge — so each edge has its own ``P_ij`` and each neighbour gets a different message.

What runs here. The Communicator seam has one gossip: a worker sends ONE message that every neighbour receives
and gets back ``Σ_j w_ij m_j``. Per-edge messages ``X_i P_ij`` cannot be expressed, so neither can warm start.
With synchronized randomness and no warm start every edge uses the same fresh random ``P`` (the authors draw
each round from the same seed on every edge), so ``X_i P`` is one broadcast and, since Σ_j w_ij = 1,
``Σ_j w_ij (X_j − X_i) P Pᵀ = (Σ_j w_ij X_j P − X_i P) Pᵀ``: this is that configuration exactly. Per round
and layer, with the round's P shared by all workers (drawn from a seed taken once from the run's generator, so
every process draws the same; orthonormalised by QR):

    odd rounds (right):  m_i = X_i P  (rows × r);   X_i ← X_i + γ (Σ_j w_ij m_j − m_i) Pᵀ
    even rounds (left):  m_i = Xᵢᵀ P  (cols × r);   X_i ← X_i + γ P (Σ_j w_ij m_j − m_i)ᵀ

and the 1-D layers go in the same message as they are (``X_i ← X_i + γ (Σ_j w_ij X_j − X_i)``). Without layer
shapes each segment (or the whole vector) is one zero-padded square matrix. Step order as the authors' DPSGD
wrapper: gossip the current models, then the SGD step with the gradients taken at them, ``x ← G(x) − η d``.
The authors skip the gossip of their first round (equal starting models have no differences); here every
round gossips (round 0 is then a no-op on equal models, but it is sent and counted).

The average moves as SGD's (every worker applies the same linear map to its differences with W doubly
stochastic): ``mean(x_{t+1}) = mean(x_t) − η mean(d_t)``. With rank ≥ every layer's side (square layers or the
padded square of a flat vector) P is square, P Pᵀ = I, and with γ = 1 this is D-PSGD, ``x ← W x − η d``.
Traffic: one message per round of float32 values, ``r·rows`` or ``r·cols`` per layer (alternating) plus the
1-D layers; counted once per round as every broadcast is.

Not reproduced, for want of a per-edge exchange in the seam: warm start and per-edge randomness (the method's
power iteration). γ is the run's ``gamma`` (the authors' ``diffusion_rate``, 1 by default; with
``--compressor none`` ``gamma=auto`` is 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..comm import Traffic
from ..compressors import make_compressor
from ..compressors.rows import RowStream
from ..errors import BenchError
from .base import ALGORITHMS, Algorithm

SEED_BOUND = 2**62


@dataclass(frozen=True)
class PowerGossipOptions:
    rank: int = 1  # r, the rank of each layer's approximation of the model differences (the authors' default 1)
    gamma: float = 1.0  # consensus step (the authors' diffusion_rate)

    def __post_init__(self) -> None:
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise BenchError(f"powergossip rank={self.rank!r} must be a positive integer")
        if not 0.0 < float(self.gamma) <= 1.0:
            raise BenchError(f"powergossip gamma={self.gamma!r} must be in (0, 1]")


class Block(NamedTuple):
    """One segment ``[start, start + size)`` viewed as a ``rows × cols`` matrix (zero-padded past size)."""

    start: int
    size: int
    rows: int
    cols: int
    rank: int  # min(rows, cols, rank option)


def plan(d: int, rank: int, segments: list[int] | None, shapes: list[tuple[int, ...]] | None
         ) -> tuple[list[Block], list[tuple[int, int]]]:
    """The low-rank blocks and the exact (start, size) ranges of a vector of d entries."""
    sizes = segments or [d]
    blocks, exact = [], []
    start = 0
    for k, size in enumerate(sizes):
        if shapes is not None:
            shape = shapes[k]
            matrix = (shape[0], size // shape[0]) if len(shape) >= 2 else None
        else:
            side = math.isqrt(size - 1) + 1
            matrix = (side, side)
        if matrix is None:
            exact.append((start, size))
        else:
            blocks.append(Block(start, size, *matrix, min(rank, *matrix)))
        start += size
    return blocks, exact


@ALGORITHMS.register("powergossip")
class PowerGossip(Algorithm):
    name = "powergossip"
    label = "PowerGossip"
    own_compression = True  # low rank, by itself: the --compressor stays `none`
    consensus_step = True
    settings = ("gamma",)
    Options = PowerGossipOptions
    examples = ({}, {"rank": 2, "gamma": 0.5})
    buffers = ("t", "seed")

    def setup(self) -> None:
        self.blocks, self.exact = plan(self.x.shape[1], self.options.rank, self.segments, self.shapes)
        self.t = 0  # rounds gossiped: odd ones project on the right, even ones on the left
        # one seed for the run's projections, identical on every worker and process: drawn from the whole
        # generator (not a worker's rows)
        source = self.generator.generator if isinstance(self.generator, RowStream) else self.generator
        device = source.device if source is not None else self.x.device
        self.seed = int(torch.randint(0, SEED_BOUND, (1,), generator=source, device=device))
        self._exact_compressor = make_compressor("none")

    def bases(self, t: int) -> list[torch.Tensor]:
        """Round t's orthonormal P of every block (``cols × r`` on odd rounds, ``rows × r`` on even ones), the
        same on every worker: a Gaussian draw seeded by (seed, t), orthonormalised."""
        if not self.blocks:
            return []
        right = t % 2 == 1
        sides = [(b.cols if right else b.rows, b.rank) for b in self.blocks]
        gen = torch.Generator(device=self.x.device).manual_seed((self.seed + t) % SEED_BOUND)
        draw = torch.randn(sum(k * r for k, r in sides), generator=gen, dtype=self.x.dtype, device=self.x.device)
        pieces = torch.split(draw, [k * r for k, r in sides])
        return [torch.linalg.qr(p.view(k, r)).Q for p, (k, r) in zip(pieces, sides)]

    def _matrix(self, b: Block) -> torch.Tensor:
        w = self.x.shape[0]
        piece = self.x[:, b.start : b.start + b.size]
        if b.rows * b.cols == b.size:
            return piece.reshape(w, b.rows, b.cols)
        padded = self.x.new_zeros(w, b.rows * b.cols)
        padded[:, : b.size] = piece
        return padded.view(w, b.rows, b.cols)

    def _gossip(self) -> None:
        w, gamma = self.x.shape[0], float(self.options.gamma)
        right = self.t % 2 == 1
        bases = self.bases(self.t)
        mats = [self._matrix(b) for b in self.blocks]
        # m_i = X_i P (right) or X_iᵀ P (left), [w, k, r]
        sent = [torch.matmul(m if right else m.transpose(1, 2), p) for m, p in zip(mats, bases)]
        parts = [self.x[:, s : s + n] for s, n in self.exact] + [m.reshape(w, -1) for m in sent]
        message = self._exact_compressor.compress(torch.cat(parts, dim=1))
        # Σ_j w_ij m_j − m_i for every part at once
        diff = self.comm.gossip_into(message, torch.zeros_like(message.values), self_shift=-1.0)
        sizes = [n for _, n in self.exact] + [m[0].numel() for m in sent]
        pieces = torch.split(diff, sizes, dim=1)
        for (s, n), piece in zip(self.exact, pieces):
            self.x[:, s : s + n].add_(piece, alpha=gamma)
        for b, m, p, piece in zip(self.blocks, sent, bases, pieces[len(self.exact):]):
            delta = piece.view_as(m)  # [w, k, r]
            change = torch.matmul(delta, p.T) if right else torch.matmul(p, delta.transpose(1, 2))
            self.x[:, b.start : b.start + b.size].add_(change.reshape(w, -1)[:, : b.size], alpha=gamma)
        self.t += 1

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)  # at the models the gradients were taken at, before the gossip
        self._gossip()
        if d is not None:
            self.x.sub_(d, alpha=lr)
        return self.comm.drain()
