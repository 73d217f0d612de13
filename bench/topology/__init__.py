"""Communication graphs and their gossip matrices: ``make_topology("torus", 16)`` gives W and its spectral gap."""
from .base import WEIGHT_SCHEMES, Graph, Topology
from .graphs import TOPOLOGIES, graph_digest, make_topology

__all__ = ["Topology", "Graph", "make_topology", "graph_digest", "TOPOLOGIES", "WEIGHT_SCHEMES"]
