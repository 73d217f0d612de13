"""The CIFAR ResNet family: the parameter counts the paper's MB column rests on, and a working model."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.errors import BenchError
from bench.models import resnet_cifar



def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("depth, expected", [(8, 78_042), (20, 272_474)])
def test_parameter_counts(depth, expected):
    assert n_params(resnet_cifar(depth)) == expected


def test_count_decomposes_into_the_documented_layers():
    # ResNet-20 = the zero-padding ("option A") ResNet-20's 269,722 parameters plus two 1×1-conv
    # shortcuts with their BatchNorm: 16·32 + 2·32 and 32·64 + 2·64.
    model = resnet_cifar(20)
    shortcut = sum(p.numel() for name, p in model.named_parameters() if "shortcut" in name)
    assert shortcut == (16 * 32 + 2 * 32) + (32 * 64 + 2 * 64)
    assert n_params(model) - shortcut == 269_722
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 19 + 2 and all(c.bias is None for c in convs)
    assert n_params(resnet_cifar(20, num_classes=100)) == 272_474 + 90 * 65


def test_forward_backward_and_modes():
    torch.manual_seed(0)
    model = resnet_cifar(20)
    x = torch.randn(2, 3, 32, 32)
    out = model(x)
    assert out.shape == (2, 10) and torch.isfinite(out).all()
    out.sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    model.eval()
    with torch.no_grad():
        a, b = model(x), model(x)
    assert torch.equal(a, b)  # eval uses running BatchNorm statistics
    assert model(torch.randn(1, 3, 32, 32)).shape == (1, 10)


def test_a_few_steps_fit_a_tiny_batch():
    # A proper model must be trainable: SGD drives the loss on 8 fixed images down.
    torch.manual_seed(0)
    model = resnet_cifar(8)
    x, y = torch.randn(8, 3, 32, 32), torch.arange(8) % 10
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("depth", [0, 2, 7, 9, 21, -4, 20.0, "20", True])
def test_bad_depth_raises(depth):
    with pytest.raises(BenchError, match="6k"):
        resnet_cifar(depth)


def test_bad_num_classes_raises():
    with pytest.raises(BenchError, match="num_classes"):
        resnet_cifar(20, num_classes=0)
