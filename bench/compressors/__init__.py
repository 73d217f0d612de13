"""Compression operators (none, sign, top-k, random-k, QSGD) for ``[workers, d]`` tensors, with
per-layer segments, explicit generators (or row slices of one, ``RowStream``), bit accounting and
the real wire encoding (``wire.encode`` / ``wire.decode``); ``make_compressor`` builds one from a spec."""
from .base import COMPRESSORS, Compressor, Message, WireField, make_compressor, measure_delta
from .rows import RowStream
from . import identity, qsgd, sign, sparsify  # noqa: F401  (importing registers the operators)

__all__ = ["COMPRESSORS", "Compressor", "Message", "RowStream", "WireField", "make_compressor", "measure_delta"]
