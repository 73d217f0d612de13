"""Communicators (the seam between algorithms and a runtime) and the network cost model.

The names below are loaded when first asked for, so the network model (``bench.comm.netmodel``, no torch)
can be read where torch is not imported: the pipeline's checks of a study (bench/pipeline/check.py).
"""
import importlib

_HOMES = {
    "Communicator": "base",
    "Traffic": "base",
    "Mixer": "mixing",
    "NETWORK_PRESETS": "netmodel",
    "NetworkModel": "netmodel",
    "make_network": "netmodel",
    "SimulatedCommunicator": "simulated",
}
__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
