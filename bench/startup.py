"""The cyclic garbage collector held while a command-line process starts.

Importing torch allocates about a million objects that live as long as the process, and the collector, which
runs every 700 allocations, walks them again and again: some 370 collections, 0.1 s of torch's import alone.
A process's entry point calls ``hold`` before its imports, and ``release`` once they are made, before its work:
everything alive then is frozen (``gc.freeze``: left out of every later collection) and collection resumes for
what the work allocates. Only a hold is released: a library caller's own setting of the collector is its own.
"""
from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """No cyclic collection until ``release`` (nothing, where the collector is already off)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """After a ``hold``: freeze what is alive and collect as usual again. Without one, nothing."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
