"""Communicators (the seam between algorithms and a runtime) and the network cost model."""
from .base import Communicator, Traffic
from .mixing import Mixer
from .netmodel import NETWORK_PRESETS, NetworkModel, make_network
from .simulated import SimulatedCommunicator

__all__ = [
    "Communicator",
    "Traffic",
    "Mixer",
    "NETWORK_PRESETS",
    "NetworkModel",
    "make_network",
    "SimulatedCommunicator",
]
