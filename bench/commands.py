"""Implementations of the consensus sub-commands (``tune-gamma``, ``consensus``)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tqdm import tqdm

from .consensus import DEFAULT_GAMMA_GRID, ConsensusTrace, best_of, run_consensus, tune_gamma
from .files import atomic_write_text
from .topology import make_topology


def _progress(items, desc: str, quiet: bool):
    """A bar on a terminal; off one (a log file) the commands say one line per compressor instead."""
    return tqdm(items, desc=desc, disable=quiet or not sys.stderr.isatty(), leave=False, dynamic_ncols=True)


def _say(text: str, quiet: bool) -> None:
    if not quiet and not sys.stderr.isatty():
        print(text, file=sys.stderr, flush=True)


def _tune(topo, compressor: str, grid, steps: int, dim: int, seed: int, quiet: bool) -> list[ConsensusTrace]:
    return tune_gamma(topo, compressor, grid, steps, dim, seed,
                      progress=lambda items: _progress(items, f"γ for {compressor}", quiet))


def cmd_tune_gamma(args) -> int:
    topo = make_topology(args.topology, args.nodes, weights=args.weights)
    grid = DEFAULT_GAMMA_GRID if args.grid is None else args.grid  # the parser refuses an empty grid
    tick = time.perf_counter()
    traces = _tune(topo, args.compressor, grid, args.steps, args.dim, args.seed, args.quiet)
    best = best_of(traces)
    _say(f"{args.compressor}: best γ = {best.gamma:.4g} of {len(grid)} values × {args.steps} rounds "
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


def cmd_consensus(args) -> int:
    """Exact gossip and/or Choco-Gossip per compressor (γ tuned first unless given): a table and CSVs."""
    import pandas as pd

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
                gamma = best_of(_tune(topo, spec, DEFAULT_GAMMA_GRID, tune_steps, args.dim, args.seed,
                                      args.quiet)).gamma
                how = f"γ = {gamma:.4g} (tuned: {len(DEFAULT_GAMMA_GRID)} values × {tune_steps} rounds)"
            traces.append(run_consensus(topo, spec, gamma=gamma, steps=args.steps, dim=args.dim,
                                        seed=args.seed, record_every=every))
        last = traces[-1]
        error = "diverged" if last.diverged else f"relative error {last.final_error:.2e}"
        _say(f"[{k}/{len(args.methods)}] {spec}: {how}, {error} after {args.steps} rounds "
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


def cmd_bits(args) -> int:
    """Per-layer bit accounting of Table 1: MiB (2^20 bytes) one worker sends per iteration."""
    from .compressors import make_compressor
    from .errors import BenchError
    from .models import resnet_cifar

    if not args.model.startswith("resnet") or not args.model[6:].isdigit():
        raise BenchError(f"unknown model {args.model!r}; use resnetD with D = 6k+2, e.g. resnet20 or resnet8")
    segments = [p.numel() for p in resnet_cifar(int(args.model[6:])).parameters()]
    print(f"# {args.model}: {sum(segments):,} parameters in {len(segments)} tensors, compressed per tensor")
    print(f"{'compressor':<26}{'paper MiB':>11}{'wire MiB':>11}")
    for spec in args.compressors:
        comp = make_compressor(spec)
        mib = 8 * 2**20
        print(f"{comp.spec:<26}{comp.paper_bits(segments) / mib:>11.4f}{comp.wire_bits(segments) / mib:>11.4f}")
    return 0
