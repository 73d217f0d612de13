"""Small helpers shared by the model zoo: argument checks and which parameters skip weight decay."""
from __future__ import annotations

from torch import nn

from ..errors import BenchError

# _BatchNorm covers BatchNorm1d/2d/3d and SyncBatchNorm alike.
_BATCHNORM = nn.modules.batchnorm._BatchNorm


def positive_int(name: str, value: object) -> int:
    # bool is an int subclass; `hidden=True` is a typo, not a width of one.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchError(f"{name}={value!r} must be a positive integer")
    return value


def probability(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise BenchError(f"{name}={value!r} must be a number in [0, 1)")
    return float(value)


def uses_batchnorm(model: nn.Module) -> bool:
    """True if any submodule is a BatchNorm, whose running statistics are extra state to gossip or not."""
    return any(isinstance(m, _BATCHNORM) for m in model.modules())


def no_weight_decay_mask(model: nn.Module) -> list[bool]:
    """One flag per entry of ``model.parameters()``: True for BatchNorm weights and biases, which the
    usual recipe (e.g. Goyal et al. 2017) exempts from weight decay."""
    exempt = {id(p) for m in model.modules() if isinstance(m, _BATCHNORM) for p in m.parameters(recurse=False)}
    return [id(p) in exempt for p in model.parameters()]
