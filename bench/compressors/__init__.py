"""Compression operators (none, sign, top-k, random-k, QSGD) for ``[workers, d]`` tensors, with
per-layer segments, explicit generators (or row slices of one, ``RowStream``), bit accounting and
the real wire encoding (``wire.encode`` / ``wire.decode``); ``make_compressor`` builds one from a spec.

Every module of this package is imported here, so an operator registers by being a module of it: a new one is
one module that defines its class with ``@register`` (its knobs, how a spec names it, its encoding), and no list
to extend; the helper modules register nothing."""
from .base import Compressor, Message, WireField, measure_delta
from .rows import RowStream
from .spec import COMPRESSORS, help_text, make_compressor, parse_compressor
from ..registry import import_modules

import_modules(__name__, __path__)  # each module that defines a plugin registers it

__all__ = ["COMPRESSORS", "Compressor", "Message", "RowStream", "WireField", "help_text", "make_compressor",
           "measure_delta", "parse_compressor"]
