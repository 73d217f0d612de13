"""Neural network models the tasks train, by registry name: ``make_model("resnet20", num_classes=10)``."""
from __future__ import annotations

import inspect
from collections.abc import Callable

from torch import nn

from ..errors import BenchError
from ..registry import Registry
from .cnn1d import CNN1D
from .linear import LinearModel
from .lstm import PAPER_VOCAB, WIKITEXT2_VOCAB, LSTMLanguageModel
from .mlp import MLP
from .resnet_cifar import resnet_cifar
from .resnet_imagenet import ResNet50
from .util import no_weight_decay_mask, uses_batchnorm

MODELS: Registry[Callable[..., nn.Module]] = Registry("model")


def resnet20(num_classes: int = 10) -> nn.Module:
    return resnet_cifar(20, num_classes)


def resnet8(num_classes: int = 10) -> nn.Module:
    return resnet_cifar(8, num_classes)


# Registered smallest first, the order error messages list them in.
for _name, _factory in [("linear", LinearModel), ("mlp", MLP), ("cnn1d", CNN1D), ("resnet8", resnet8),
                        ("resnet20", resnet20), ("resnet50", ResNet50), ("lstm", LSTMLanguageModel)]:
    MODELS.register(_name)(_factory)


def model_options(name: str) -> list[str]:
    """The keyword options the model ``name`` accepts."""
    return list(inspect.signature(MODELS.get(name)).parameters)


def make_model(name: str, **options) -> nn.Module:
    """Build a registered model; an unknown name or option is a BenchError listing the allowed ones."""
    allowed = model_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise BenchError(f"model {name!r} has no option {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}")
    missing = [p.name for p in inspect.signature(MODELS.get(name)).parameters.values()
               if p.default is inspect.Parameter.empty and p.name not in options]
    if missing:
        raise BenchError(f"model {name!r} needs option {', '.join(map(repr, missing))}; allowed: {', '.join(allowed)}")
    return MODELS.get(name)(**options)


__all__ = [
    "MODELS", "make_model", "model_options", "uses_batchnorm", "no_weight_decay_mask", "resnet_cifar",
    "MLP", "CNN1D", "LSTMLanguageModel", "ResNet50", "LinearModel", "WIKITEXT2_VOCAB", "PAPER_VOCAB",
]
