"""`bench topology`: a graph and its mixing matrix described (spectral gap, β, degrees, the whole spectrum and the
effective number of neighbours n_eff of Vogels et al. 2022 at a few decays γ), as text or JSON."""
from __future__ import annotations

import json

from .common import node_count, seed

NAME = "topology"
HELP = "describe a topology and its mixing matrix"


def add_arguments(p) -> None:
    p.add_argument("--topology", required=True, help="ring, torus, complete, star, exponential, social, "
                   "random-regular:K, erdos-renyi:P, expander, margulis, one-peer-exp, base:K, file:PATH")
    p.add_argument("--nodes", type=node_count, required=True)
    p.add_argument("--weights", default=None, help="uniform | metropolis | maxdeg (default: as in the paper)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the random graphs")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    from ..topology import make_topology
    from ..topology.spectrum import spectrum_summary

    topo = make_topology(args.topology, args.nodes, weights=args.weights, seed=args.seed)
    info = {**topo.describe(), **spectrum_summary(topo)}
    if args.json:
        print(json.dumps(info))
    else:
        text = {**info, "spectrum": _spectrum_line(info["spectrum"]),
                "n_eff": ", ".join(f"{g}: {v:.4g}" for g, v in info["n_eff"].items())}
        width = max(len(k) for k in text)
        for key, value in text.items():
            print(f"{key:<{width}}  {value}")
    return 0


def _spectrum_line(values: list[float], shown: int = 4) -> str:
    """All values when few, else the largest and smallest few (--json prints them all)."""
    def fmt(v: float) -> str:
        return f"{v:.4g}" if abs(v) >= 1e-12 else "0"  # rounding noise of an exact zero

    if len(values) <= 2 * shown + 1:
        return " ".join(fmt(v) for v in values)
    middle = f" … ({len(values) - 2 * shown} more; --json lists all) … "
    return " ".join(fmt(v) for v in values[:shown]) + middle + " ".join(fmt(v) for v in values[-shown:])
