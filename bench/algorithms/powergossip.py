"""PowerGossip (Vogels, Karimireddy, Jaggi 2020, "PowerGossip: Practical Low-Rank Communication Compression in
Decentralized Deep Learning"): gossip of rank-r approximations of the model differences along each edge, in the
published form (a warm-started basis per edge) and in the authors' ``synchronized_randomness=True,
warm_start=False`` form (one shared random basis per round): option ``warm_start``
(``--set algorithm_options.warm_start=false``).

Each layer's tensor is a matrix ``X`` (``rows × cols``: a tensor (a, b, …) as a × b·…); 1-D tensors (biases,
BatchNorm) go exactly (``X_i ← X_i + γ Σ_j w_ij (X_j − X_i)``, the authors' ``OnlyOnLargeParameters``). Without
layer shapes each segment (or the whole vector) is one zero-padded square matrix. Each edge {i, j} applies the
rank-r approximation of its difference at both ends, r = min(rows, cols, rank), γ the run's ``gamma`` (the
authors' ``diffusion_rate``; with ``--compressor none`` ``gamma=auto`` is 1), alternately on the right and on
the left (round t odd: right):

    right:  X_i ← X_i + γ Σ_j w_ij (X_j − X_i) Q_ij Q_ijᵀ      (Q_ij: cols × r, orthonormal)
    left:   X_i ← X_i + γ Σ_j w_ij P_ij P_ijᵀ (X_j − X_i)      (P_ij: rows × r, orthonormal)

Warm start (``warm_start=true``, the default: the authors' ``PowerGossip`` defaults). Both ends of an edge hold
the same two bases per layer, P_ij and Q_ij, drawn at the start from a seed of the run and the pair (min, max),
so both processes draw the same. On a right round worker i sends ``X_i Q_ij`` on link i → j (a different
message on each link); with what arrives on j → i it forms ``(X_j − X_i) Q_ij``, applies the update, and the
difference oriented from the lower id to the higher, ``(X_hi − X_lo) Q_ij``, becomes the edge's next P_ij: one
power iteration per round on each edge's difference, so the basis follows the difference's leading directions.
Left rounds do the same with ``X_iᵀ P_ij`` and the next Q_ij. A basis is orthonormalised when used, by QR where
the authors use Gram–Schmidt: the same subspace where the difference has rank r, and still r orthonormal columns
where it has less (a zero-padded layer), which keeps the case below exact. Both ends form the oriented
difference from the same two messages (b − a at one end is −(a − b) at the other, bit for bit; the float32
payload arrives exactly), so they keep the same bases and the edge's two updates cancel: the average moves as
SGD's. A column of the difference that is exactly 0 (equal models, as in round 0 of training, where the authors
skip the gossip) keeps the edge's previous column. State: for each link this process sends on, Σ_layers
(rows + cols)·r floats (``edge_bases``, checkpointed with the models); a process holds only its workers' links.
Not reproduced: the authors' ``synchronized_randomness=False`` without warm start (fresh bases per edge).

Shared randomness (``warm_start=false``). Every edge uses the same fresh random P of the round (the authors draw
it from one seed on every edge), so ``X_i P`` is one broadcast and, since Σ_j w_ij = 1,
``Σ_j w_ij (X_j − X_i) P Pᵀ = (Σ_j w_ij X_j P − X_i P) Pᵀ``: a gossip of ``m_i = X_i P`` (right) or
``X_iᵀ P`` (left), P drawn from a seed taken once from the run's generator and the round, orthonormalised by QR.

Step order as the authors' DPSGD wrapper: gossip the current models, then the SGD step with the gradients
taken at them, ``x ← G(x) − η d``. Every round gossips (round 0 is a no-op on equal models, but sent and
counted). With rank ≥ every layer's side P, Q are square, P Pᵀ = I, and with γ = 1 a round is D-PSGD's
``x ← W x − η d`` in both forms. Traffic per round, float32: warm start sends one message on each out-link,
the 1-D layers plus ``r·rows`` (right rounds) or ``r·cols`` (left rounds) per layer, so a worker of degree k
puts k of them on its links; the shared form sends one such message as a gossip (k copies, or one
transmission on a broadcast medium). Warm start needs both ends of every edge to exchange in the same round,
round after round: on a time-varying graph (one-peer-exp, whose rounds' links go one way and change; base:K,
whose rounds' groups change) it is refused in one line.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from ..comm import Traffic
from ..comm.base import LocalLinks
from ..compressors import make_compressor
from ..compressors.rows import RowStream
from ..errors import BenchError
from .base import Algorithm, register
from .knobs import flag, knob, read_rank
from .step_tuning import ConsensusStepOptions, TunesItsStep

SEED_BOUND = 2**62


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


class EdgeSlots:
    """The links this process sends on, each paired with the link back, laid out per worker: the k-th out-link
    of local worker i sits in slot (i, k) of a ``[w, K, …]`` tensor (K the largest local out-degree, the rest
    zeros). A worker's messages to all its neighbours, and the sum of its edges' updates, are then one batched
    product with its model: no copy of the model per link, and the same order of additions on every run."""

    def __init__(self, local: LocalLinks, device, dtype):
        links, out = local.links, local.out
        src, dst = links.src[out], links.dst[out]
        back = links.reverse()[out]
        if (back < 0).any():
            raise BenchError("powergossip warm_start=true needs the link back of every link (a symmetric W)")
        self.E, self.w = len(src), local.hi - local.lo
        self.pairs = list(zip(np.minimum(src, dst).tolist(), np.maximum(src, dst).tolist()))
        # where, among what this process receives, the link back of each out-link arrives
        self.back = torch.as_tensor(np.searchsorted(local.into, back), device=device)
        self.rows = local.tensor("send_rows", device)
        slot = np.arange(self.E) - np.searchsorted(src, src, side="left")  # out-links are sorted by sender
        self.slot = torch.as_tensor(slot, device=device)
        self.K = int(slot.max()) + 1 if self.E else 0
        self.weight = torch.as_tensor(links.weight[back], dtype=dtype, device=device)  # w_ij of link i → j
        # +1 at the lower id's end, −1 at the other: times (X_j − X_i)·basis it is (X_hi − X_lo)·basis at both
        self.orientation = torch.as_tensor(np.where(src < dst, 1.0, -1.0), dtype=dtype, device=device)

    def spread(self, per_link: torch.Tensor) -> torch.Tensor:
        """``[E, …]`` → ``[w, K, …]`` (zeros in the slots without a link)."""
        out = per_link.new_zeros(self.w, self.K, *per_link.shape[1:])
        out[self.rows, self.slot] = per_link
        return out

    def side_by_side(self, per_link: torch.Tensor) -> torch.Tensor:
        """``[E, k, r]`` → ``[w, k, K·r]``: each worker's links' matrices next to each other."""
        spread = self.spread(per_link)
        return spread.permute(0, 2, 1, 3).reshape(self.w, per_link.shape[1], -1)

    def per_link(self, side_by_side: torch.Tensor, r: int) -> torch.Tensor:
        """The inverse of ``side_by_side``: ``[w, k, K·r]`` → ``[E, k, r]``."""
        w, k, _ = side_by_side.shape
        return side_by_side.view(w, k, self.K, r).permute(0, 2, 1, 3)[self.rows, self.slot]


@dataclass(frozen=True)
class PowerGossipOptions(ConsensusStepOptions):  # γ: the authors' diffusion_rate
    rank: int = knob(1, read_rank)  # r, the rank of each layer's approximation of the model differences (authors': 1)
    # True: a basis per edge, warm-started from its last difference (published); False: one shared random basis
    warm_start: bool = knob(True, flag)


@register
class PowerGossip(TunesItsStep, Algorithm):
    name, label = "powergossip", "PowerGossip"
    Options = PowerGossipOptions
    keeps_average = True
    own_compression = True  # low rank, by itself: the --compressor stays `none`
    consensus_step = True
    examples = ({}, {"rank": 2, "gamma": 0.5}, {"warm_start": False}, {"rank": 2, "gamma": 0.5, "warm_start": False})
    # rank ≥ every side: square orthogonal bases, each edge applies its whole difference
    exact_forms = (({"rank": 64, "gamma": 1.0}, "dpsgd", {}),
                   ({"rank": 64, "gamma": 1.0, "warm_start": False}, "dpsgd", {}))
    gossip_alone = (("none", {"rank": 1}, 600, 1e-6), ("none", {"rank": 1, "warm_start": False}, 600, 1e-6))
    buffers = ("t", "seed", "edge_bases")

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        # not fixed_graph: with warm_start=false (one shared basis a round) it runs on a time-varying graph too
        super().check_topology(name, time_varying, options)
        if time_varying and (options is None or options.warm_start):
            raise BenchError(f"powergossip warm_start=true steps each edge's basis at both ends every round; "
                             f"topology {name!r} changes its links from round to round, so an edge's basis has "
                             f"no next round at both its ends: "
                             f"use algorithm_options.warm_start=false (a shared basis per round) or a static graph")

    def setup(self) -> None:
        self.blocks, self.exact = plan(self.x.shape[1], self.options.rank, self.segments, self.shapes)
        self.t = 0  # rounds gossiped: odd ones project on the right, even ones on the left
        # one seed for the run's bases, identical on every worker and process: drawn from the whole
        # generator (not a worker's rows)
        source = self.generator.generator if isinstance(self.generator, RowStream) else self.generator
        device = source.device if source is not None else self.x.device
        self.seed = int(torch.randint(0, SEED_BOUND, (1,), generator=source, device=device))
        self._exact_compressor = make_compressor("none")
        # warm start only: per link this process sends on, each layer's P (rows × r) then Q (cols × r), the last
        # oriented difference (or the first draw), orthonormalised when used
        self.edge_bases = None
        if self.options.warm_start:
            self._setup_edges()

    # -- warm start: a basis per edge ----------------------------------------------------------
    def _setup_edges(self) -> None:
        self.check_topology(self.comm.topology.name, self.comm.time_varying, self.options)
        local = self.comm.links()
        self.edges = EdgeSlots(local, self.x.device, self.x.dtype)
        self._sides = []  # per block: the columns of edge_bases holding its P, then its Q
        start = 0
        for b in self.blocks:
            middle, stop = start + b.rows * b.rank, start + (b.rows + b.cols) * b.rank
            self._sides.append((slice(start, middle), slice(middle, stop)))
            start = stop
        # each edge's first bases, drawn on CPU from a seed of the run and the pair: the same at both ends,
        # whichever process and device holds them
        n = local.links.n
        draws = [torch.randn(start, generator=torch.Generator().manual_seed((self.seed + a * n + b) % SEED_BOUND),
                             dtype=self.x.dtype) for a, b in self.edges.pairs]
        first = torch.stack(draws) if draws else torch.zeros(0, start, dtype=self.x.dtype)
        self.edge_bases = first.to(self.x.device)

    def _edge_gossip(self) -> None:
        edges, gamma, right = self.edges, float(self.options.gamma), self.t % 2 == 1
        E = edges.E
        parts = [self.x[edges.rows, s : s + n] for s, n in self.exact]
        used = []  # per block: this round's orthonormal bases, each worker's side by side, [w, side, K·r]
        for b, (p, q) in zip(self.blocks, self._sides):
            side = b.cols if right else b.rows
            # Householder QR, not the authors' Gram–Schmidt: a difference of rank < r (a zero-padded layer)
            # still gives r orthonormal columns; where it has rank r both span the same subspace
            basis = torch.linalg.qr(self.edge_bases[:, q if right else p].reshape(E, side, b.rank)).Q
            used.append(edges.side_by_side(basis))
            m = self._matrix(b)
            # X_i Q_ij (right) or X_iᵀ P_ij (left) for every out-link i → j
            sent = torch.matmul(m if right else m.transpose(1, 2), used[-1])
            parts.append(edges.per_link(sent, b.rank).reshape(E, sent.shape[1] * b.rank))
        message = self._exact_compressor.compress(torch.cat(parts, dim=1))
        received = self.comm.exchange(message)
        diff = received[edges.back] - message.values  # (X_j − X_i)·basis on each out-link i → j
        step = (gamma * edges.weight)[:, None]
        sizes = [n for _, n in self.exact] + [(b.rows if right else b.cols) * b.rank for b in self.blocks]
        pieces = torch.split(diff, sizes, dim=1)
        for (s, n), piece in zip(self.exact, pieces):
            self.x[:, s : s + n].add_(edges.spread(piece * step).sum(dim=1))
        for b, (p, q), beside, piece in zip(self.blocks, self._sides, used, pieces[len(self.exact):]):
            delta = piece.view(E, piece.shape[1] // b.rank, b.rank)
            scaled = edges.side_by_side(delta * step[:, :, None])  # γ w_ij (X_j − X_i)·basis in each slot
            # Σ_j over each worker's slots in one product, [rows, K·r] × [K·r, cols]
            change = (torch.matmul(scaled, beside.transpose(1, 2)) if right
                      else torch.matmul(beside, scaled.transpose(1, 2)))
            self.x[:, b.start : b.start + b.size].add_(change.reshape(self.x.shape[0], -1)[:, : b.size])
            # the warm start: right rounds' rows × r difference is the next P, left rounds' cols × r the next Q;
            # a column that is exactly 0 (the ends agree along it, e.g. equal models) keeps the previous one
            new = delta * edges.orientation[:, None, None]
            target = p if right else q
            old = self.edge_bases[:, target].reshape(new.shape)
            following = torch.where(new.norm(dim=1, keepdim=True) == 0, old, new)
            self.edge_bases[:, target] = following.reshape(E, piece.shape[1])
        self.t += 1

    # -- shared randomness: one basis per round for every edge -----------------------------------
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

    def _shared_gossip(self) -> None:
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

    def _matrix(self, b: Block) -> torch.Tensor:
        w = self.x.shape[0]
        piece = self.x[:, b.start : b.start + b.size]
        if b.rows * b.cols == b.size:
            return piece.reshape(w, b.rows, b.cols)
        padded = self.x.new_zeros(w, b.rows * b.cols)
        padded[:, : b.size] = piece
        return padded.view(w, b.rows, b.cols)

    def step(self, grad, lr: float) -> Traffic:
        d = self._direction(grad)  # at the models the gradients were taken at, before the gossip
        if self.options.warm_start:
            self._edge_gossip()
        else:
            self._shared_gossip()
        if d is not None:
            self.x.sub_(d, alpha=lr)
        return self.comm.drain()
