"""Choco-SGD's round with the scaled sign on a circulant graph in one pass over the state (bench/kernels/
choco_sign.c), where torch's eager operations take about fifteen streams of memory: x − x̂, its row norms,
the signs, x̂ += q, the shifted adds of u += (W − I) q and x += γu.

Here the norms come first, a block of columns at a time in the cache (|x − x̂| into a lent block, summed as
``sign.l1_norm`` sums it: the same bits), so x − x̂ is never written out; then the kernel makes q again from x
and x̂ a block at a time and does the rest while the block is in the cache: x, x̂ and u are each read and written
once, and no [n, d] buffer of x − x̂ or of q is kept. Its arithmetic is the eager round's, entry by entry, so the
iterates are the same bits (tests/test_choco_kernel.py); a round's traffic is counted as the communicator counts
a gossip. Used only where everything the kernel assumes holds (``fused_round``): the simulator on a CPU, float32,
Choco's paper order without AdaGossip, a static circulant W without faults, the sign operator and, on a circulant
other than the ring, a state of FUSED_MIN_ENTRIES or more (below it the eager round is as fast); and only after
the kernel gave the eager round's bits on this machine (``kernel_agrees``). Elsewhere Choco runs eagerly.

On a ring (shifts 0, +1 and −1) the kernel takes the rows in order instead (``RingRound``): each row's q is made
once and kept while the rows on either side use it, so it needs no blocks of columns, and its OpenMP threads are
torch's own. It also makes the norms, a row at a time just before the row's q, adding as torch's sum adds
(``norm_lanes``: the width of torch's vector, found by comparing bits; where none matches, torch's norm pass
comes first). It was faster than the eager round at every size measured, from 8 × 20 to 64 × 10⁶
(docs/performance.md, "The ring's rows in order"), so a ring takes it whatever the state's size."""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import torch

from .. import kernels
from ..compressors import Message
from ..compressors.scratch import BLOCK_COLUMNS, column_blocks, temporary
from ..compressors.sign import Sign

# columns of a block: its q for every row ([n, B] float32, 1 MB at n = 64) stays in a core's cache while the rows
# stream by (a round at n = 64, d = 10⁶ on a 2-core CPU: 66–70 ms at 512–2,048 columns, 62–63 ms at 4,096,
# 65 ms at 8,192)
BLOCK = 4096
# below this many entries one thread does the round
SPLIT_MIN = 1 << 18
# below this many entries the ring's round runs on one thread: torch's grain (at::internal::GRAIN_SIZE), below which
# its own element-wise operations do not use the pool either
GRAIN = 32768
# below this many entries the eager round is as fast or faster on a circulant other than the ring. Choco-sign rounds
# on an exponential graph on a 2-core CPU, the cache flushed before each, the blocks on torch's OpenMP threads
# (docs/performance.md, "The column kernel on torch's threads"): 16 × 15,210 entries 0.97 ms eager against 1.26 ms
# fused, 64 × 4,096 1.12 against 1.28; 32 × 15,210 1.56 against 1.37, 64 × 8,192 1.72 against 1.57, 64 × 15,210
# 2.40 against 1.93, 64 × 125,000 19.1 against 11.1, 64 × 10⁶ 146 against 76 ms
FUSED_MIN_ENTRIES = 1 << 19

_P, _I = ctypes.c_void_p, ctypes.c_int64


def _bind(name: str, argtypes: list, restype=None):
    """The function ``name`` of the choco_sign library with its C signature, or None where there is no library."""
    lib = kernels.load("choco_sign")
    if lib is None:
        return None
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = argtypes, restype
    return fn


@functools.lru_cache(maxsize=1)
def _kernel():
    return _bind("choco_sign_columns_parallel",
                 [_P, _P, _P, _P, _I, _P, _I, _I, _P, _P, _I, ctypes.c_float, _P, _I, _I])


@functools.lru_cache(maxsize=1)
def _ring_kernel():
    return _bind("choco_sign_ring", [_P, _P, _P, _P, _I, _P, _I, _I, _P, _P, ctypes.c_float, _I, _P, _P, _I, _I])


@functools.lru_cache(maxsize=1)
def norm_lanes() -> int:
    """The lanes of the float vector with which torch's CPU sum adds a contiguous row, found by comparing the
    kernel's ``choco_abs_sum`` with ``_difference_l1`` on rows of 1 to 16,384 entries (its scalar path, its vector
    path with partial vectors, a tail and every level of its cascade); 0 where no width gives torch's bits, and the
    ring's kernel then takes torch's norms."""
    fn = _bind("choco_abs_sum", [_P, _P, _I, _I], ctypes.c_float)
    if fn is None:
        return 0
    gen = torch.Generator().manual_seed(3)
    rows = []
    for width in (1, 3, 5, 7, 15, 16, 17, 33, 63, 64, 65, 100, 257, 1000, 1023, 4096, 5000, 15210, BLOCK_COLUMNS):
        a, b = torch.randn(2, 3, width, generator=gen)
        a[0] *= 1e4  # rows of different magnitudes: an order of the additions shows in the bits
        rows.append((a, b, _difference_l1(a, b).flatten().tolist()))
    for lanes in (8, 16, 4, 32):
        if all(fn(a[r].data_ptr(), b[r].data_ptr(), a.shape[1], lanes) == want[r]
               for a, b, want in rows for r in range(a.shape[0])):
            return lanes
    return 0


def _difference_l1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """‖x − y‖₁ of each row [w, 1], as ``sign.l1_norm(x − y)`` computes it on a CPU (the same blocks, the same
    sums: the same bits), without writing x − y out: each block's difference goes into the lent block."""
    w, d = x.shape
    buffer = temporary("abs", (w, min(d, BLOCK_COLUMNS)), x.dtype, x.device)
    total = None
    for columns, width in column_blocks(d):
        block = buffer[:, :width]
        part = torch.sub(x[:, columns], y[:, columns], out=block).abs_().sum(dim=1, keepdim=True)
        total = part if total is None else total.add_(part)
    return total


def _scales(x: torch.Tensor, x_hat: torch.Tensor, segments: list[int], scratch) -> torch.Tensor:
    """The sign's scale ‖x − x̂‖₁ / d of every row and segment, [n, segments], as the eager compression has them."""
    with scratch.lent():
        scales = [_difference_l1(xs, hs) / xs.shape[1] for xs, hs in
                  zip(torch.split(x, segments, dim=1), torch.split(x_hat, segments, dim=1))]
    return torch.cat(scales, dim=1).contiguous()


def ring_neighbours(offsets, n: int) -> np.ndarray | None:
    """For shifts at ``offsets`` that make a ring (0, +1 and −1, n ≥ 3), the row each shift reads relative to its
    own (−1, 0, +1), in the shifts' order; None for any other circulant."""
    relative = {0: 0, 1 % n: 1, (n - 1) % n: -1}
    if n < 3 or len(offsets) != 3 or sorted(int(o) % n for o in offsets) != sorted(relative):
        return None
    return np.array([relative[int(o) % n] for o in offsets], dtype=np.int64)


def shifts_of(mixer, self_shift: float) -> list[tuple[int, float]]:
    """(offset, weight) of (W + self_shift·I)'s shifted adds, in the order ``Mixer.accumulate`` makes them."""
    n = mixer.n
    out = [(sh.offset % n, sh.weight + (self_shift if sh.offset % n == 0 else 0.0)) for sh in mixer.shifts]
    if self_shift and not any(offset == 0 for offset, _ in out):
        out.append((0, self_shift))
    return out


class _KernelRound:
    """A kernel bound to one static graph, layer segments and operator; ``round`` takes the state."""

    def __init__(self, fn, n: int, segments: list[int], mixer, compressor, record_gossip):
        self.fn, self.n, self.segments, self.record_gossip = fn, n, list(segments), record_gossip
        shifts = shifts_of(mixer, -1.0)
        self.offsets = np.array([o for o, _ in shifts], dtype=np.int64)
        self.weights = np.array([w for _, w in shifts], dtype=np.float32)  # torch's alpha, rounded to float32
        self.seg_end = np.cumsum(self.segments).astype(np.int64)
        # what the gossip's traffic is counted from (the kernel never materialises the message's values)
        self.message = Message(values=None, wire_bits=compressor.wire_bits(self.segments),
                               paper_bits=compressor.paper_bits(self.segments), parts=None, codec=compressor,
                               segments=tuple(self.segments))

    def fits(self, x: torch.Tensor, x_hat: torch.Tensor, u: torch.Tensor) -> bool:
        shape = (self.n, int(self.seg_end[-1]))
        return all(t.device.type == "cpu" and t.dtype == torch.float32 and tuple(t.shape) == shape
                   and t.is_contiguous() for t in (x, x_hat, u))


class FusedSignRound(_KernelRound):
    """The round on any circulant, a block of columns at a time (``choco_sign_columns_parallel``)."""

    def __init__(self, fn, n: int, segments: list[int], mixer, compressor, record_gossip, block: int = BLOCK,
                 split_min: int = SPLIT_MIN):
        super().__init__(fn, n, segments, mixer, compressor, record_gossip)
        self.block, self.split_min = block, split_min
        self.blocks = None  # each thread's q of a block [threads, n, block], made at the first round

    def round(self, x: torch.Tensor, x_hat: torch.Tensor, u: torch.Tensor, gamma: float, scratch) -> None:
        """q = sign-compress(x − x̂), x̂ += q, u += (W − I) q, x += γ u, in place, and the gossip counted."""
        n, d = x.shape
        scale = _scales(x, x_hat, self.segments, scratch)
        self.record_gossip(self.message)
        step = ctypes.c_float(float(gamma))  # as torch rounds add_'s alpha for float32
        nblocks = -(-d // self.block)
        parties = max(1, min(torch.get_num_threads(), nblocks)) if x.numel() >= self.split_min else 1
        if self.blocks is None or self.blocks.shape[0] < parties:
            self.blocks = torch.empty(parties, n, self.block, dtype=torch.float32)
        self.fn(x.data_ptr(), x_hat.data_ptr(), u.data_ptr(), scale.data_ptr(), len(self.segments),
                self.seg_end.ctypes.data, n, d, self.offsets.ctypes.data, self.weights.ctypes.data,
                len(self.offsets), step, self.blocks.data_ptr(), self.block, parties)


class RingRound(_KernelRound):
    """The round on a ring, its rows in order (``choco_sign_ring``), split among up to ``parties`` threads."""

    def __init__(self, fn, n: int, segments: list[int], mixer, compressor, record_gossip, parties: int | None = None,
                 lanes: int | None = None):
        super().__init__(fn, n, segments, mixer, compressor, record_gossip)
        # the norms in the kernel, added as torch adds them (norm_lanes), else torch's pass before it
        self.lanes = norm_lanes() if lanes is None else lanes
        self.scale = torch.empty(n, len(self.segments), dtype=torch.float32)
        self.relative = ring_neighbours(self.offsets, n)
        if self.relative is None:
            raise ValueError(f"the ring kernel needs shifts 0, +1 and -1 of n >= 3 rows, got {list(self.offsets)}")
        self.parties = parties
        self.edge = self.roll = None

    def round(self, x: torch.Tensor, x_hat: torch.Tensor, u: torch.Tensor, gamma: float, scratch) -> None:
        n, d = x.shape
        scale = self.scale if self.lanes else _scales(x, x_hat, self.segments, scratch)
        self.record_gossip(self.message)
        # two rows or more each; unless told, one thread below torch's own grain, as torch's operations on such a state
        wanted = self.parties or (torch.get_num_threads() if x.numel() >= GRAIN else 1)
        parties = max(1, min(wanted, n // 2))
        if self.edge is None or self.edge.shape[0] < 2 * parties:
            self.edge = torch.empty(2 * parties, d, dtype=torch.float32)  # each party's first and last q
            self.roll = torch.empty(parties, 3, d, dtype=torch.float32)   # each party's last three
        self.fn(x.data_ptr(), x_hat.data_ptr(), u.data_ptr(), scale.data_ptr(), len(self.segments),
                self.seg_end.ctypes.data, n, d, self.relative.ctypes.data, self.weights.ctypes.data,
                ctypes.c_float(float(gamma)), parties, self.edge.data_ptr(), self.roll.data_ptr(), self.lanes,
                BLOCK_COLUMNS)


def fused_round(algo) -> _KernelRound | None:
    """The fused round for this Choco instance, or None where it does not apply (see the module's docstring)."""
    from ..comm.simulated import SimulatedCommunicator

    x, comm, o = algo.x, algo.comm, algo.options
    if not (type(comm) is SimulatedCommunicator and comm.faults is None and not comm.time_varying
            and comm.mixer.method == "circulant" and isinstance(algo.compressor, Sign)
            and o.order == "paper" and not o.adagossip and x.device.type == "cpu" and x.dtype == torch.float32
            and x.dim() == 2 and x.is_contiguous()):
        return None
    n, segments = x.shape[0], algo.segments or [x.shape[1]]
    if ring_neighbours([offset for offset, _ in shifts_of(comm.mixer, -1.0)], n) is not None:
        fn = _ring_kernel()
        if fn is None or not kernel_agrees():
            return None
        return RingRound(fn, n, segments, comm.mixer, algo.compressor, comm.record_gossip)
    if x.numel() < FUSED_MIN_ENTRIES:
        return None
    fn = _kernel()
    if fn is None or not kernel_agrees():
        return None
    return FusedSignRound(fn, n, segments, comm.mixer, algo.compressor, comm.record_gossip, block=BLOCK,
                          split_min=SPLIT_MIN)


@functools.lru_cache(maxsize=1)
def kernel_agrees() -> bool:
    """Whether both kernels give the eager round's bits on this machine: two rounds with three uneven segments
    over 3,011 columns, a zero row and signed zeros, against the eager operations. The column kernel on a ring of
    6 and an exponential graph of 8 (whole blocks and a partial one, split between two threads); the ring's
    kernel on rings of 4 (one thread), 5 (two threads, two rows and three) and 6, whatever threads torch has."""
    from ..comm.mixing import Mixer
    from ..compressors import make_compressor
    from ..compressors.scratch import Scratch
    from ..topology import make_topology

    columns, ring = _kernel(), _ring_kernel()
    if columns is None or ring is None:
        return False
    comp = make_compressor("sign")
    cases = [("ring", 6, "columns"), ("exponential", 8, "columns"), ("ring", 4, 1), ("ring", 5, 2), ("ring", 6, None)]
    for spec, n, how in cases:
        topo = make_topology(spec, n)
        mixer = Mixer(topo.W, topo.grid_shape)
        if mixer.method != "circulant":
            return False
        gen = torch.Generator().manual_seed(n)
        segments = [1000, 7, 2004]
        x = torch.randn(n, sum(segments), generator=gen)
        x[1] = 0.0
        x[2, :4] = torch.tensor([0.0, -0.0, 1e-40, -1e-40])
        eager = [x.clone(), torch.zeros_like(x), torch.zeros_like(x)]
        fused = [t.clone() for t in eager]
        if how == "columns":
            kernel = FusedSignRound(columns, n, segments, mixer, comp, lambda message: None, block=256, split_min=0)
        else:
            kernel = RingRound(ring, n, segments, mixer, comp, lambda message: None, parties=how)
        for _ in range(2):
            q = comp.compress(eager[0] - eager[1], None, segments).values
            eager[1].add_(q)
            mixer.accumulate(eager[2], q, self_shift=-1.0)
            eager[0].add_(eager[2], alpha=0.7)
            kernel.round(*fused, 0.7, Scratch())
        if not all(torch.equal(a, b) for a, b in zip(eager, fused)):
            return False
    return True
