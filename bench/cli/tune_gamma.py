"""`bench tune-gamma`: Choco's γ by grid search on the consensus problem (the flags of cli/consensus.py)."""
from __future__ import annotations

import argparse
import json
import math

from .consensus import check_size, consensus_arguments, say, tune

NAME = "tune-gamma"
HELP = "grid search of Choco's γ on the consensus problem"
MAX_GRID = 1000  # γ values of one tune-gamma grid, each a full consensus run


def gamma_grid(text: str) -> list[float]:
    """``LO:HI:COUNT`` (COUNT values log-spaced from 10^LO to 10^HI) or a comma list of values."""
    import numpy as np

    try:
        if ":" in text:
            lo, hi, count = text.split(":")
            lo, hi, count = float(lo), float(hi), int(count)
        else:
            grid = [float(g) for g in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not LO:HI:COUNT (log10 bounds, a whole COUNT) "
                                         "nor a comma list of numbers") from None
    if ":" in text:
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise argparse.ArgumentTypeError(f"{text!r}: LO and HI must be finite (log10 of the smallest and "
                                             "largest gamma)")
        if not 1 <= count <= MAX_GRID:  # an empty grid used to fall back to the default one
            raise argparse.ArgumentTypeError(f"{text!r}: COUNT={count} must be >= 1 and <= {MAX_GRID}")
        grid = [float(g) for g in np.logspace(lo, hi, count)]
    outside = [g for g in grid if not 0 < g <= 1]
    if outside:
        raise argparse.ArgumentTypeError(f"{text!r}: gamma={outside[0]:g} is outside (0, 1]")
    return grid


def add_arguments(p) -> None:
    consensus_arguments(p)
    p.add_argument("--compressor", required=True)
    p.add_argument("--grid", type=gamma_grid, default=None, help="LO:HI:COUNT in log10 (default -3:0:20) or a list")
    p.add_argument("--json", action="store_true")


def run(args) -> int:
    import time

    from ..algorithms.gossip import DEFAULT_GAMMA_GRID, best_of
    from ..topology import make_topology

    check_size(args)
    topo = make_topology(args.topology, args.nodes, weights=args.weights)
    grid = DEFAULT_GAMMA_GRID if args.grid is None else args.grid  # the parser refuses an empty grid
    tick = time.perf_counter()
    traces = tune(topo, args.compressor, grid, args.steps, args.dim, args.seed, args.quiet)
    best = best_of(traces)
    say(f"{args.compressor}: best γ = {best.gamma:.4g} of {len(grid)} values × {args.steps} rounds "
        f"({time.perf_counter() - tick:.1f} s)", args.quiet)
    if args.json:
        print(json.dumps({
            "topology": topo.describe(), "compressor": best.method, "steps": args.steps, "dim": args.dim,
            "grid": [{"gamma": tr.gamma, "rel_error": tr.final_error if not tr.diverged else None,
                      "diverged": tr.diverged} for tr in traces],
            "best_gamma": best.gamma, "best_rel_error": best.final_error,
        }))
        return 0
    print(f"# Choco-Gossip on {topo.name} (n={topo.n}, ρ={topo.spectral_gap:.4f}), d={args.dim}, "
          f"{args.steps} rounds, compressor {best.method}")
    print(f"{'gamma':>10}  {'rel. error':>12}")
    for tr in traces:
        err = "diverged" if tr.diverged else f"{tr.final_error:.3e}"
        mark = "  <- best" if tr is best else ""
        print(f"{tr.gamma:>10.4g}  {err:>12}{mark}")
    print(f"best gamma = {best.gamma:.4g} (relative consensus error {best.final_error:.3e})")
    return 0
