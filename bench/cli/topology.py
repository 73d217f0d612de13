"""`bench topology`: a graph and its mixing matrix described (spectral gap, β, degrees), as text or JSON."""
from __future__ import annotations

import json

from .common import node_count, seed

NAME = "topology"
HELP = "describe a topology and its mixing matrix"


def add_arguments(p) -> None:
    p.add_argument("--topology", required=True, help="ring, torus, complete, star, exponential, social, "
                   "random-regular:K, erdos-renyi:P, expander, margulis, one-peer-exp, file:PATH")
    p.add_argument("--nodes", type=node_count, required=True)
    p.add_argument("--weights", default=None, help="uniform | metropolis | maxdeg (default: as in the paper)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the random graphs")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    from ..topology import make_topology

    topo = make_topology(args.topology, args.nodes, weights=args.weights, seed=args.seed)
    info = topo.describe()
    if args.json:
        print(json.dumps(info))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            print(f"{key:<{width}}  {value}")
    return 0
