"""The algorithms: each method is one module of this package, holding its options, what it declares of itself and
its maths, filed in ``ALGORITHMS`` by ``@register`` on its class. Every module here is imported, so a new method is
its module and its tests; a shared part (local, gossip, link_copies, ...) registers nothing."""
from .base import Algorithm
from .knobs import AUTO
from .local import LocalStep, LocalStepConfig
from .method import ALGORITHMS, Method, parse_options, reference_method, register, shortcuts
from ..registry import import_modules

import_modules(__name__, __path__)  # each module that defines a plugin registers it

__all__ = ["ALGORITHMS", "AUTO", "Algorithm", "LocalStep", "LocalStepConfig", "Method", "make_algorithm",
           "parse_options", "reference_method", "register", "shortcuts"]


def make_algorithm(name: str, x0, comm, compressor=None, local=None, options: dict | None = None,
                   generator=None, segments=None, shapes=None) -> Algorithm:
    cls = ALGORITHMS.get(name)
    return cls(x0, comm, compressor=compressor, local=local, options=parse_options(cls, options),
               generator=generator, segments=segments, shapes=shapes)
