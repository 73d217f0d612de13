"""The CIFAR ResNet family of He et al. (2016), depth 6k + 2 (ResNet-8, -20, -32, …): three stages
of k basic blocks at 16/32/64 channels, 1×1-conv + BatchNorm shortcuts where the shape changes."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import BenchError

STAGE_CHANNELS = (16, 32, 64)


def _conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    # No bias: the BatchNorm that follows has its own shift.
    return nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = _conv3x3(in_channels, out_channels, stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = _conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            # The projection shortcut ("option B"); the paper's 0.27 M parameters count it.
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetCifar(nn.Module):
    def __init__(self, blocks_per_stage: int, num_classes: int):
        super().__init__()
        self.conv1 = _conv3x3(3, STAGE_CHANNELS[0])
        self.bn1 = nn.BatchNorm2d(STAGE_CHANNELS[0])
        stages = []
        in_channels = STAGE_CHANNELS[0]
        for i, channels in enumerate(STAGE_CHANNELS):
            # Every stage after the first halves the resolution in its first block.
            stride = 1 if i == 0 else 2
            blocks = []
            for b in range(blocks_per_stage):
                blocks.append(BasicBlock(in_channels, channels, stride if b == 0 else 1))
                in_channels = channels
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(STAGE_CHANNELS[-1], num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        # He initialisation suits ReLU networks trained from scratch (He et al. 2015/2016).
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.stages(out)
        # Global average pooling works for any input resolution, not only 32×32.
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc(out)


def resnet_cifar(depth: int, num_classes: int = 10) -> nn.Module:
    """ResNet-``depth`` for 32×32 RGB images; depth must be 6k + 2 with k ≥ 1."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 8 or (depth - 2) % 6:
        raise BenchError(f"ResNet depth {depth!r} is not of the form 6k + 2 (8, 14, 20, 32, 44, 56, 110, …)")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise BenchError(f"num_classes {num_classes!r} must be a positive integer")
    return ResNetCifar((depth - 2) // 6, num_classes)
