"""PowerSGD (Vogels et al. 2019, "PowerSGD: Practical Low-Rank Gradient Compression"), as PyTorch's DDP
communication hook ``powerSGD_hook`` runs it: rank-R power iteration with warm start and error feedback.

Each layer's gradient is viewed as a matrix ``rows × cols`` (a tensor (a, b, …) as a × b·…). Per worker i,
``M_i = g_i + e_i``; with the shared ``Q`` (warm-started: the previous round's; at first a random draw
identical on every worker): ``P = mean_i(M_i Q)`` (all-reduce), ``P̂ = orthogonalise(P)`` (Gram–Schmidt,
identical everywhere since P is), ``Q = mean_i(M_iᵀ P̂)`` (all-reduce), ``Δ = P̂ Qᵀ``; the error memory
keeps ``e_i = M_i − Δ`` (what the hook keeps). Only mean(M) enters Δ (both all-reduces are linear), so
nothing compression drops is lost: ``Σ_t Δ_t = Σ_t mean(g_t) − mean(e_T)``.

A layer is sent exactly (its gradient joins the first all-reduce, error 0) when low rank would not save
bits: ``R·(rows + cols) ≥`` its size; 1-D tensors (biases, BatchNorm) always are. Without per-layer shapes
each segment (or the whole vector) is one zero-padded square matrix, as the hook's batched variant does.

The compressed quantity is the gradient: the shared local step (weight decay, momentum) acts after
aggregation on the averaged Δ, as the optimizer does after the hook, so models stay equal and with every
layer exact this is all-reduce SGD. Traffic per round: one all-reduce of the exact layers with every
layer's P, one of every layer's Q (float32, priced as all-reduces: the messages are summed on the way).
Not reproduced: the hook's ``start_powerSGD_iter`` (plain all-reduce for the first iterations).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..comm import Traffic
from ..compressors.rows import RowStream
from .base import Algorithm, register
from .knobs import KnobOptions, knob, read_rank


class Block(NamedTuple):
    """One segment ``[start, start + size)`` viewed as a ``rows × cols`` matrix (zero-padded past size)."""

    start: int
    size: int
    rows: int
    cols: int


def plan(d: int, rank: int, segments: list[int] | None, shapes: list[tuple[int, ...]] | None
         ) -> tuple[list[Block], list[tuple[int, int]]]:
    """The compressed blocks and the exact (start, size) ranges of a vector of d entries."""
    sizes = segments or [d]
    compressed, exact = [], []
    start = 0
    for k, size in enumerate(sizes):
        if shapes is not None:
            shape = shapes[k]
            matrix = (shape[0], size // shape[0]) if len(shape) >= 2 else None
        else:  # no layer structure: one square matrix, as batched_powerSGD_hook does
            side = math.isqrt(size - 1) + 1
            matrix = (side, side)
        if matrix is not None and rank * (matrix[0] + matrix[1]) < size:
            compressed.append(Block(start, size, *matrix))
        else:
            exact.append((start, size))
        start += size
    return compressed, exact


def orthogonalise(p: torch.Tensor) -> torch.Tensor:
    """Orthonormalise the columns of each ``[rows, R]`` matrix of ``p [w, rows, R]`` in place: Gram–Schmidt
    as the hook's ``_orthogonalize_gram_schmidt``, with each projection done twice, so a column that is
    only rounding noise (P of rank < R) still comes out orthogonal to the others; a zero column stays 0."""
    for i in range(p.shape[2]):
        col = p[:, :, i : i + 1]
        if i:
            done = p[:, :, :i]
            for _ in range(2):
                col.sub_(torch.bmm(done, torch.bmm(done.transpose(1, 2), col)))
        norm = col.norm(dim=1, keepdim=True)
        col.div_(torch.where(norm > 0, norm, torch.ones_like(norm)))
    return p


@dataclass(frozen=True)
class PowerSGDOptions(KnobOptions):
    rank: int = knob(2, read_rank)  # R, the rank of each layer's approximation


@register
class PowerSGD(Algorithm):
    name, label = "powersgd", "PowerSGD"
    Options = PowerSGDOptions
    own_compression = True  # low rank, by itself: the --compressor stays `none`
    centralized = True
    examples = ({}, {"rank": 1})
    exact_forms = (({"rank": 64}, "allreduce", {}),)  # low rank saves nothing: every layer in one exact all-reduce
    same_run_as = (({"rank": 64}, "allreduce", {}),)  # ... its traffic too
    messages_per_round = 2  # the all-reduces of P (with the exact layers) and of Q
    buffers = ("error", "q")
    error_feedback = ("error", "gradient")
    decaying_optimum = (("none", {"rank": 1}, 0.5, 1e-2),)

    def setup(self) -> None:
        rank = self.options.rank
        self.blocks, self.exact = plan(self.x.shape[1], rank, self.segments, self.shapes)
        self.error = torch.zeros_like(self.x)  # stays 0 on the exact layers
        # Q of every block, [cols, R] flattened one after another: one draw from the run's generator
        # (the whole generator, not a worker's rows, so every worker and every process draws the same)
        source = self.generator.generator if isinstance(self.generator, RowStream) else self.generator
        q = torch.randn(sum(b.cols for b in self.blocks) * rank, generator=source, dtype=self.x.dtype,
                        device=self.x.device)
        for piece in self._split_q(q[None]):
            orthogonalise(piece)  # as the hook does with its first Q
        self.q = q[None].repeat(self.x.shape[0], 1)  # one identical row per local worker

    def _split_q(self, q: torch.Tensor) -> list[torch.Tensor]:
        rank = self.options.rank
        pieces = torch.split(q, [b.cols * rank for b in self.blocks], dim=1)
        return [p.view(q.shape[0], b.cols, rank) for p, b in zip(pieces, self.blocks)]

    def _matrix(self, m: torch.Tensor, b: Block) -> torch.Tensor:
        w = m.shape[0]
        piece = m[:, b.start : b.start + b.size]
        if b.rows * b.cols == b.size:
            return piece.reshape(w, b.rows, b.cols)
        padded = m.new_zeros(w, b.rows * b.cols)
        padded[:, : b.size] = piece
        return padded.view(w, b.rows, b.cols)

    def step(self, grad, lr: float) -> Traffic:
        if grad is None:
            return self.comm.drain()
        w, rank = grad.shape[0], self.options.rank
        m = grad + self.error  # M_i = g_i + e_i
        mats = [self._matrix(m, b) for b in self.blocks]
        ps = [torch.bmm(mat, q) for mat, q in zip(mats, self._split_q(self.q))]  # [w, rows, R]
        exact = [m[:, s : s + n] for s, n in self.exact]
        first = self.comm.allreduce_mean(torch.cat(exact + [p.reshape(w, -1) for p in ps], dim=1))
        n_exact = sum(n for _, n in self.exact)
        exact_mean, p_mean = torch.split(first, [n_exact, first.shape[1] - n_exact], dim=1)
        update = torch.empty_like(m)
        for (s, n), piece in zip(self.exact, torch.split(exact_mean, [n for _, n in self.exact], dim=1)):
            update[:, s : s + n] = piece
        if self.blocks:
            sizes = [b.rows * rank for b in self.blocks]
            p_hats = [orthogonalise(p.reshape(w, b.rows, rank))
                      for p, b in zip(torch.split(p_mean, sizes, dim=1), self.blocks)]
            qs = [torch.bmm(mat.transpose(1, 2), p) for mat, p in zip(mats, p_hats)]  # [w, cols, R]
            self.q = self.comm.allreduce_mean(torch.cat([q.reshape(w, -1) for q in qs], dim=1))
            for b, p, q in zip(self.blocks, p_hats, self._split_q(self.q)):
                approx = torch.bmm(p, q.transpose(1, 2)).reshape(w, -1)[:, : b.size]
                update[:, b.start : b.start + b.size] = approx
                self.error[:, b.start : b.start + b.size] = m[:, b.start : b.start + b.size] - approx
        self.local.descend(self.x, update, lr)
        return self.comm.drain()
