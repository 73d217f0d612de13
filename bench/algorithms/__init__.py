"""The five algorithms, each registered by name and written once against a Communicator."""
from . import allreduce, choco, dcd, dpsgd, ecd  # noqa: F401  (registration)
from .base import ALGORITHMS, Algorithm, parse_options
from .local import LocalStep, LocalStepConfig

__all__ = ["ALGORITHMS", "Algorithm", "LocalStep", "LocalStepConfig", "make_algorithm", "parse_options"]


def make_algorithm(name: str, x0, comm, compressor=None, local=None, options: dict | None = None,
                   generator=None, segments=None) -> Algorithm:
    cls = ALGORITHMS.get(name)
    return cls(x0, comm, compressor=compressor, local=local, options=parse_options(cls, options),
               generator=generator, segments=segments)
