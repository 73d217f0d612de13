"""Fast products with a mixing matrix W for all workers stacked on dimension 0.

Gossip is never a dense n×n×d loop: a constant W is a mean, a circulant W (ring,
exponential graph, uniform complete graph, each round of the one-peer exponential graph:
½(x + x shifted by 2^k)) is a few shifted in-place adds, a uniform torus is shifts along both
grid axes, and anything else is a sparse CSR product.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class _Shift:
    offset: int  # row i receives x[(i + offset) % n]
    weight: float


# up to this many entries a shifted add takes a rolled copy (a temporary that small costs less than the two
# narrowed adds' extra calls: 29 → ~15 µs for a ring's W @ x at n = 8, d = 20 on a 2-core CPU)
SMALL_SHIFT = 1 << 14


def _add_shifted(out: torch.Tensor, x: torch.Tensor, offset: int, weight: float, dim: int) -> None:
    """``out[i] += weight · x[(i + offset) mod n]`` along ``dim``, in place, no temporaries of x's size."""
    n = x.shape[dim]
    k = offset % n
    if k == 0:
        out.add_(x, alpha=weight)
        return
    if x.numel() <= SMALL_SHIFT:  # one rolled copy and one add: fewer calls, the same sum on every entry
        out.add_(x.roll(-k, dim), alpha=weight)
        return
    out.narrow(dim, 0, n - k).add_(x.narrow(dim, k, n - k), alpha=weight)
    out.narrow(dim, n - k, k).add_(x.narrow(dim, 0, k), alpha=weight)


def _circulant_shifts(W: np.ndarray, tol: float = 1e-14) -> list[_Shift] | None:
    n = W.shape[0]
    first = W[0]
    idx = np.arange(n)
    for i in range(1, n):
        if not np.allclose(W[i, (idx + i) % n], first, atol=tol, rtol=0):
            return None
    return [_Shift(int(k), float(first[k])) for k in range(n) if first[k] != 0.0]


def csr_like(matrix: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """``matrix`` as a sparse CSR tensor with ``like``'s dtype and device."""
    dense = torch.tensor(matrix, dtype=like.dtype, device=like.device)
    with warnings.catch_warnings():  # CSR support is flagged beta; the products with it are tested
        warnings.simplefilter("ignore", UserWarning)
        return dense.to_sparse_csr()


# a block of columns that mixes in the cache: x's and out's rows of it together about this many bytes (measured
# on a 2-core CPU at n = 64, d = 10⁶, ring: 50 ms for the whole product, 31 ms in blocks of 16,384 columns,
# 36 ms at 4,096, 47 ms at 65,536; docs/performance.md, group b)
BLOCK_BYTES = 8 << 20


def _block_columns(x: torch.Tensor) -> int | None:
    """Columns a block of a CPU product holds, or None where blocking does not pay (a GPU, or x fits anyway)."""
    if x.device.type != "cpu" or x.dim() < 2 or x.numel() * x.element_size() <= BLOCK_BYTES:
        return None
    row_bytes = x.element_size() * x.shape[0]
    columns = max(1, BLOCK_BYTES // (2 * row_bytes))
    return columns if x[0].numel() > 2 * columns else None


class Mixer:
    """Computes ``W @ x`` for ``x`` of shape ``[n, d]`` with the cheapest exact method for W."""

    def __init__(self, W: np.ndarray, grid_shape: tuple[int, int] | None = None):
        self.W = np.asarray(W, dtype=np.float64)
        self.n = self.W.shape[0]
        self._csr: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
        self.shifts: list[_Shift] | None = None
        self.torus: tuple[int, int, float, float] | None = None
        if np.allclose(self.W, 1.0 / self.n, atol=1e-15, rtol=0):
            self.method = "mean"
        elif grid_shape is not None and self._is_uniform_torus(grid_shape):
            self.method = "torus"
        else:
            self.shifts = _circulant_shifts(self.W)
            self.method = "circulant" if self.shifts is not None and len(self.shifts) <= 16 else "sparse"
        if self.method != "sparse":
            # only the sparse product reads W again: a time-varying topology's communicator holds one Mixer per
            # round of the period, so structured ones keep their shifts, not an n×n matrix each
            self.W = None

    def _is_uniform_torus(self, grid_shape: tuple[int, int]) -> bool:
        a, b = grid_shape
        self_w, nb_w = float(self.W[0, 0]), float(self.W[0, 1])
        expected = np.zeros_like(self.W)
        for r in range(a):
            for c in range(b):
                i = r * b + c
                expected[i, i] = self_w
                for j in (((r + 1) % a) * b + c, ((r - 1) % a) * b + c, r * b + (c + 1) % b, r * b + (c - 1) % b):
                    expected[i, j] = nb_w
        if not np.allclose(expected, self.W, atol=1e-15, rtol=0):
            return False
        self.torus = (a, b, self_w, nb_w)
        return True

    def _sparse(self, like: torch.Tensor) -> torch.Tensor:
        key = (like.dtype, like.device)
        if key not in self._csr:
            self._csr[key] = csr_like(self.W, like)
        return self._csr[key]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``W @ x`` as a new tensor."""
        return self.accumulate(torch.zeros_like(x), x)

    def accumulate(self, out: torch.Tensor, x: torch.Tensor, self_shift: float = 0.0) -> torch.Tensor:
        """``out += (W + self_shift·I) @ x`` in place, without a temporary the size of x where W is
        structured (``self_shift=-1`` gives the consensus direction (W − I) x). On a CPU, a large ``x [n, d]`` of
        a circulant or torus W is mixed a block of columns at a time: each column mixes alone, and a block's
        rows of x and out stay in the cache across the several shifted adds, which otherwise each stream both
        tensors through memory (the same additions in the same order: the same bits)."""
        if x.shape[0] != self.n or out.shape != x.shape:
            raise ValueError(f"mixing expects {self.n} rows and matching shapes, got {tuple(x.shape)}, {tuple(out.shape)}")
        columns = _block_columns(x)
        if columns is not None and self.method in ("circulant", "torus") and out.is_contiguous():
            flat, acc = x.reshape(self.n, -1), out.view(self.n, -1)
            for start in range(0, flat.shape[1], columns):
                self._accumulate(acc[:, start:start + columns], flat[:, start:start + columns], self_shift)
            return out
        return self._accumulate(out, x, self_shift)

    def _accumulate(self, out: torch.Tensor, x: torch.Tensor, self_shift: float) -> torch.Tensor:
        if self.method == "mean":
            if self_shift:
                out.add_(x, alpha=self_shift)
            return out.add_(x.mean(dim=0, keepdim=True))
        if self.method == "circulant":
            for shift in self.shifts:  # type: ignore[union-attr]
                weight = shift.weight + (self_shift if shift.offset % self.n == 0 else 0.0)
                _add_shifted(out, x, shift.offset, weight, dim=0)
            if self_shift and not any(sh.offset % self.n == 0 for sh in self.shifts):  # type: ignore[union-attr]
                out.add_(x, alpha=self_shift)
            return out
        if self.method == "torus":
            a, b, self_w, nb_w = self.torus  # type: ignore[misc]
            grid, acc = x.reshape(a, b, *x.shape[1:]), out.view(a, b, *x.shape[1:])
            acc.add_(grid, alpha=self_w + self_shift)
            for dim in (0, 1):
                _add_shifted(acc, grid, 1, nb_w, dim)
                _add_shifted(acc, grid, -1, nb_w, dim)
            return out
        flat, acc = x.reshape(self.n, -1), out.view(self.n, -1)
        if self_shift:
            acc.add_(flat, alpha=self_shift)
        return acc.add_(torch.sparse.mm(self._sparse(flat), flat)).view(out.shape)
