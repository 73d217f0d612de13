"""ResNet-50 for ImageNet (He et al. 2016) with the stride on the 3×3 convolution ("v1.5"), as in the
paper's datacenter experiment: bottleneck stages [3, 4, 6, 3], 25,557,032 parameters at 1000 classes."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .util import positive_int

EXPANSION = 4
STAGES = ((64, 3), (128, 4), (256, 6), (512, 3))  # (bottleneck width, blocks)


def _conv_bn(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1) -> nn.Sequential:
    # No conv bias: the BatchNorm right after has its own shift.
    conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(out_channels))


class Bottleneck(nn.Module):
    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * EXPANSION
        self.reduce = _conv_bn(in_channels, width, 1)
        # Striding the 3×3 rather than the first 1×1 (v1.5) loses less information and is the
        # variant whose ~76 % top-1 the paper's numbers match.
        self.spatial = _conv_bn(width, width, 3, stride)
        self.expand = _conv_bn(width, out_channels, 1)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = _conv_bn(in_channels, out_channels, 1, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.reduce(x))
        out = F.relu(self.spatial(out))
        return F.relu(self.expand(out) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000, zero_init_residual: bool = False):
        super().__init__()
        positive_int("num_classes", num_classes)
        self.stem = _conv_bn(3, 64, 7, stride=2)
        stages = []
        in_channels = 64
        for i, (width, blocks) in enumerate(STAGES):
            stride = 1 if i == 0 else 2  # the stem's max-pool already halved the first stage
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(in_channels, width, stride if b == 0 else 1))
                in_channels = width * EXPANSION
            stages.append(nn.Sequential(*layer))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(in_channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if zero_init_residual:
            # Each block then starts as the identity, which helps large-batch training (Goyal et al. 2017).
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.zeros_(m.expand[1].weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.stem(x))
        out = F.max_pool2d(out, kernel_size=3, stride=2, padding=1)
        out = self.stages(out)
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))
