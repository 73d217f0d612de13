"""The algorithms, each a module of this package registered by name (``@ALGORITHMS.register``) and written
once against a Communicator, on top of its entry in bench/catalog/algorithms.py (name, label, flags, options).
Every module here is imported, so a new method is its catalog entry, its module and its tests."""
import importlib
import pkgutil

from .base import ALGORITHMS, Algorithm, parse_options
from .local import LocalStep, LocalStepConfig

_SEAM = {"base", "local", "gossip", "step_tuning", "link_copies", "momentum_tracking"}  # the shared parts, not methods
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module not in _SEAM:
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["ALGORITHMS", "Algorithm", "LocalStep", "LocalStepConfig", "make_algorithm", "parse_options"]


def make_algorithm(name: str, x0, comm, compressor=None, local=None, options: dict | None = None,
                   generator=None, segments=None, shapes=None) -> Algorithm:
    cls = ALGORITHMS.get(name)
    return cls(x0, comm, compressor=compressor, local=local, options=parse_options(cls, options),
               generator=generator, segments=segments, shapes=shapes)
