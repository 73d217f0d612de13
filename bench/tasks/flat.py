"""Models as flat parameter vectors: all workers' models are rows of one ``[n, d]`` tensor.

Maps between a row and the module's parameters (and float buffers such as BatchNorm running
statistics), and gives the per-tensor segment sizes that per-layer compression uses.
"""
from __future__ import annotations

import itertools

import torch
from torch import nn


class FlatModel:
    def __init__(self, model: nn.Module):
        self.model = model
        # named_parameters() lists a tied tensor once, which is what a flat vector must hold
        self.names = [name for name, _ in model.named_parameters()]
        self.params = [p for _, p in model.named_parameters()]
        self.shapes = [p.shape for p in self.params]
        self.segments = [p.numel() for p in self.params]
        self.d = sum(self.segments)
        self.storage = self._share_storage()
        self.buffer_names = [n for n, b in model.named_buffers() if b.is_floating_point()]
        self.buffers = [b for n, b in model.named_buffers() if b.is_floating_point()]
        self.buffer_segments = [b.numel() for b in self.buffers]
        self.nb = sum(self.buffer_segments)

    def get(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Parameter dict whose tensors are views into ``flat`` (for torch.func.functional_call)."""
        out, start = {}, 0
        for name, shape, size in zip(self.names, self.shapes, self.segments):
            out[name] = flat[start:start + size].view(shape)
            start += size
        return out

    def _share_storage(self) -> torch.Tensor | None:
        """One flat tensor that every parameter becomes a view of, in order (their values kept), so that loading
        a row is one copy instead of one per parameter (a worker's step on the loop path loads its row each time:
        about 40 µs of the MLP's 500 µs step on a 2-core CPU, docs/performance.md, h). None, with the parameters as
        they were, where they do not share one dtype and device."""
        if not self.params or len({(p.dtype, p.device) for p in self.params}) != 1:
            return None
        storage = torch.cat([p.detach().reshape(-1) for p in self.params])
        for p, piece in zip(self.params, storage.split(self.segments)):
            p.data = piece.view(p.shape)
        return storage

    def _shared(self) -> bool:
        """Whether every parameter is still its view of ``storage`` (``module.to(device)`` or ``.double()`` after
        this wrapper gives them new tensors: loading then copies into each parameter, as without the storage)."""
        if self.storage is None:
            return False
        base, size = self.storage.data_ptr(), self.storage.element_size()
        offsets = itertools.accumulate(self.segments, initial=0)
        return all(p.data_ptr() == base + size * start and p.is_contiguous() and p.dtype == self.storage.dtype
                   for p, start in zip(self.params, offsets))

    def load(self, flat: torch.Tensor) -> None:
        if self._shared():
            with torch.no_grad():
                self.storage.copy_(flat.reshape(-1))
            return
        _scatter_into(self.params, self.segments, flat)

    def grad(self) -> torch.Tensor:
        return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])

    def get_buffers(self) -> torch.Tensor:
        if not self.buffers:
            return torch.empty(0)
        return torch.cat([b.detach().reshape(-1) for b in self.buffers])

    def load_buffers(self, flat: torch.Tensor) -> None:
        _scatter_into(self.buffers, self.buffer_segments, flat)

    def decay_mask(self, skip: list[bool]) -> torch.Tensor:
        """1 where weight decay applies, 0 on parameters flagged in ``skip`` (BatchNorm)."""
        return torch.cat([torch.full((size,), 0.0 if s else 1.0) for size, s in zip(self.segments, skip)])


@torch.no_grad()
def _scatter_into(tensors: list[torch.Tensor], sizes: list[int], flat: torch.Tensor) -> None:
    """Copy consecutive pieces of ``flat`` into ``tensors`` (in place, keeping their shapes)."""
    start = 0
    for t, size in zip(tensors, sizes):
        t.copy_(flat[start:start + size].view_as(t))
        start += size
