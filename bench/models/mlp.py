"""Fully connected ReLU network for vector inputs (MNIST-1D: 40 → 100 → 100 → 10; digits: 64 → 10)."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .util import positive_int


class MLP(nn.Module):
    def __init__(self, in_features: int = 40, hidden: Sequence[int] = (100, 100), num_classes: int = 10):
        super().__init__()
        positive_int("in_features", in_features)
        positive_int("num_classes", num_classes)
        widths = [positive_int("hidden width", h) for h in hidden]
        layers: list[nn.Module] = []
        prev = in_features
        for width in widths:
            layers += [nn.Linear(prev, width), nn.ReLU()]
            prev = width
        layers.append(nn.Linear(prev, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Accept [B, ...] inputs such as 8×8 digit images by flattening all but the batch axis.
        return self.net(x.flatten(1))
