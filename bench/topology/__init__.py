"""Communication graphs and their gossip matrices: ``make_topology("torus", 16)`` gives W and its spectral gap;
a time-varying one (``one-peer-exp``) gives ``W_at(t)`` per round and the gap of one period's product."""
from .base import WEIGHT_SCHEMES, Graph, Topology
from .graphs import graph_digest, make_topology
from .kinds import TOPOLOGIES, Example, help_text
from .time_varying import PeerSchedule, TimeVaryingTopology

__all__ = ["Topology", "TimeVaryingTopology", "Graph", "PeerSchedule", "make_topology", "graph_digest", "TOPOLOGIES",
           "WEIGHT_SCHEMES", "Example", "help_text"]
