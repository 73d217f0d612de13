"""Compression operators (none, sign, top-k, random-k, QSGD) for ``[workers, d]`` tensors, with
per-layer segments, explicit generators (or row slices of one, ``RowStream``), bit accounting and
the real wire encoding (``wire.encode`` / ``wire.decode``); ``make_compressor`` builds one from a spec.

Every module of this package is imported here, so an operator registers by being a module of it: a new
one is its spec class in bench/catalog/compressors.py and its module here, and no list to extend."""
import importlib
import pkgutil

from ..catalog.compressors import SPECS
from .base import COMPRESSORS, Compressor, Message, WireField, make_compressor, measure_delta
from .rows import RowStream

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")  # importing registers the operators it defines
_missing = [n for n in SPECS.names() if n not in COMPRESSORS]
if _missing:  # a spec the DAG accepts but no run could build
    raise RuntimeError(f"compressor {_missing[0]!r} has no operator: no module of bench/compressors registers it "
                       f"(its catalog entry names bench/compressors/{SPECS.get(_missing[0]).module}.py)")

__all__ = ["COMPRESSORS", "Compressor", "Message", "RowStream", "WireField", "make_compressor", "measure_delta"]
