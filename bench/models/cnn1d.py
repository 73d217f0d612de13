"""Small 1-D convolutional network for MNIST-1D signals ([B, 40] in, logits out), without BatchNorm so
that it stays a pure function of its parameters (vectorisable over workers with torch.func)."""
from __future__ import annotations

import torch
from torch import nn

from .util import positive_int


class CNN1D(nn.Module):
    def __init__(self, in_length: int = 40, channels: int = 25, num_layers: int = 3, kernel_size: int = 5,
                 num_classes: int = 10):
        super().__init__()
        for name, value in [("in_length", in_length), ("channels", channels), ("num_layers", num_layers),
                            ("kernel_size", kernel_size), ("num_classes", num_classes)]:
            positive_int(name, value)
        layers: list[nn.Module] = []
        length, prev = in_length, 1
        for _ in range(num_layers):
            # Stride 2 halves the length at each layer, so the linear head stays small (25·5 inputs).
            layers += [nn.Conv1d(prev, channels, kernel_size, stride=2, padding=kernel_size // 2), nn.ReLU()]
            length = (length + 2 * (kernel_size // 2) - kernel_size) // 2 + 1
            prev = channels
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels * length, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x.unsqueeze(1)).flatten(1))
