"""Compression operators (none, sign, top-k, random-k, QSGD) for ``[workers, d]`` tensors, with
per-layer segments, explicit generators and bit accounting; ``make_compressor`` builds one from a spec."""
from .base import COMPRESSORS, Compressor, Message, make_compressor, measure_delta
from . import identity, qsgd, sign, sparsify  # noqa: F401  (importing registers the operators)

__all__ = ["COMPRESSORS", "Compressor", "Message", "make_compressor", "measure_delta"]
