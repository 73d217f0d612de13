"""`bench consensus`: exact gossip against Choco-Gossip per compressor (γ tuned first unless given), and
what it shares with `bench tune-gamma` (cli/tune_gamma.py): the problem's flags, its size bound, progress."""
from __future__ import annotations

import sys

from ..errors import BenchError
from ..limits import MAX_CONSENSUS_ENTRIES, MAX_DIM, MAX_ROUNDS
from .common import int_between, node_count, output_dir, seed

NAME = "consensus"
HELP = "Choco-Gossip vs exact gossip, γ tuned per compressor"
rounds = int_between(1, MAX_ROUNDS, " (gossip rounds)")


def consensus_arguments(p) -> None:
    """The consensus problem's flags: the graph, the size of the state and how long to gossip."""
    p.add_argument("--topology", default="ring")
    p.add_argument("--nodes", type=node_count, default=25)
    p.add_argument("--weights", default=None)
    p.add_argument("--dim", type=int_between(1, MAX_DIM, " (coordinates per node)"), default=2000)
    p.add_argument("--steps", type=rounds, default=1000)
    p.add_argument("--seed", type=seed, default=0)
    p.add_argument("--quiet", action="store_true")


def check_size(args) -> None:
    """Each bound alone fits; their product may not (the state is n x d float64, several copies)."""
    if args.nodes * args.dim > MAX_CONSENSUS_ENTRIES:
        raise BenchError(f"--nodes {args.nodes} x --dim {args.dim} = {args.nodes * args.dim} values per state; "
                         f"at most {MAX_CONSENSUS_ENTRIES} (2 GiB of float64)")


def progress(items, desc: str, quiet: bool):
    """A bar on a terminal; off one (a log file) the commands say one line per compressor instead."""
    from tqdm import tqdm

    return tqdm(items, desc=desc, disable=quiet or not sys.stderr.isatty(), leave=False, dynamic_ncols=True)


def say(text: str, quiet: bool) -> None:
    if not quiet and not sys.stderr.isatty():
        print(text, file=sys.stderr, flush=True)


def tune(topo, compressor: str, grid, steps: int, dim: int, seed: int, quiet: bool):
    """The traces of Choco-Gossip with ``compressor`` for every γ of ``grid``."""
    from ..algorithms.gossip import tune_gamma

    return tune_gamma(topo, compressor, grid, steps, dim, seed,
                      progress=lambda items: progress(items, f"γ for {compressor}", quiet))


def add_arguments(p) -> None:
    consensus_arguments(p)
    p.add_argument("--methods", nargs="+", default=["exact", "sign", "top:0.01", "rand:0.01", "qsgd:2"],
                   help="'exact' (exact gossip) and compressor specs for Choco-Gossip")
    p.add_argument("--gamma", type=float, default=None, help="Choco's γ for every compressor (default: tuned)")
    p.add_argument("--tune-steps", type=rounds, default=None, help="rounds per γ trial (default: --steps)")
    p.add_argument("--out", type=output_dir, default=None, help="directory for traces.csv and summary.csv")


def run(args) -> int:
    """Exact gossip and/or Choco-Gossip per compressor: a table, and the traces as a tidy CSV in --out."""
    import time
    from pathlib import Path

    import pandas as pd

    from ..algorithms.gossip import DEFAULT_GAMMA_GRID, best_of, run_consensus
    from ..files import atomic_write_text
    from ..topology import make_topology

    check_size(args)
    topo = make_topology(args.topology, args.nodes, weights=args.weights)
    tune_steps = args.tune_steps or args.steps
    every = max(1, args.steps // 200)
    traces = []
    for k, spec in enumerate(args.methods, 1):
        tick = time.perf_counter()
        if spec == "exact":
            traces.append(run_consensus(topo, None, steps=args.steps, dim=args.dim, seed=args.seed, record_every=every))
            how = "exact gossip"
        else:
            gamma, how = args.gamma, f"γ = {args.gamma:.4g} (given)" if args.gamma is not None else ""
            if gamma is None:
                gamma = best_of(tune(topo, spec, DEFAULT_GAMMA_GRID, tune_steps, args.dim, args.seed,
                                     args.quiet)).gamma
                how = f"γ = {gamma:.4g} (tuned: {len(DEFAULT_GAMMA_GRID)} values × {tune_steps} rounds)"
            traces.append(run_consensus(topo, spec, gamma=gamma, steps=args.steps, dim=args.dim,
                                        seed=args.seed, record_every=every))
        last = traces[-1]
        error = "diverged" if last.diverged else f"relative error {last.final_error:.2e}"
        say(f"[{k}/{len(args.methods)}] {spec}: {how}, {error} after {args.steps} rounds "
            f"({time.perf_counter() - tick:.1f} s)", args.quiet)

    print(f"# consensus on {topo.name} (n={topo.n}, spectral gap {topo.spectral_gap:.4f}), d={args.dim}, "
          f"{args.steps} rounds, seed {args.seed}")
    print(f"{'method':<28}{'gamma':>9}{'delta':>9}{'rel. error':>12}{'Mbit/worker':>13}  (bits a worker put on its links)")
    for tr in traces:
        delta = "-" if tr.delta_measured is None else f"{tr.delta_measured:.3f}"
        err = "diverged" if tr.diverged else f"{tr.final_error:.2e}"
        print(f"{tr.method:<28}{tr.gamma:>9.4g}{delta:>9}{err:>12}{tr.bits_per_worker[-1] / 1e6:>13.3f}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        tidy = pd.concat([pd.DataFrame({
            "method": tr.method, "gamma": tr.gamma, "delta_measured": tr.delta_measured, "diverged": tr.diverged,
            "topology": topo.name, "nodes": topo.n, "spectral_gap": topo.spectral_gap, "dim": args.dim,
            "seed": args.seed, "step": tr.steps, "rel_error": tr.rel_error,
            "bits_per_worker": tr.bits_per_worker, "bits_per_worker_max": tr.bits_per_worker_max,
            "bits_paper_per_worker": tr.paper_bits_per_worker,
        }) for tr in traces], ignore_index=True)
        atomic_write_text(out / "traces.csv", tidy.to_csv(index=False))
        print(f"wrote {out / 'traces.csv'}")
    return 0
