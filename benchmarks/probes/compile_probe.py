"""A probe, not part of the fixed set: how much of benchmark b (one Choco round against one copy of
the [n, d] state) ``torch.compile`` of the whole round recovers by fusing its elementwise passes.

    python benchmarks/probes/compile_probe.py [--device cuda] [--n 64] [--d 1000000] [--out FILE.json]

For each compressor: eager and compiled round times (median of paired repeats), each against the
copy time, whether the compiled round gives the eager round's state, and dynamo's graph count
(each graph break splits the fusion)."""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from bench.algorithms import make_algorithm
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.files import atomic_write_text
from bench.perf.timing import repeat
from bench.topology import make_topology


def _choco(spec: str, x: torch.Tensor):
    return make_algorithm("choco", x.clone(), SimulatedCommunicator(make_topology("ring", x.shape[0])),
                          compressor=make_compressor(spec, contraction=True), options={"gamma": 0.5},
                          generator=torch.Generator(device=x.device).manual_seed(0))


def _bookkeeping_left_eager() -> None:
    """The round's accounting is numpy on cached, read-only arrays; dynamo would trace it through torch._numpy, which
    has no ``setflags``. It is bookkeeping, not the round's arithmetic: it runs eager, outside the graphs."""
    method = SimulatedCommunicator._account_gossip
    if not getattr(method, "_left_eager", False):
        SimulatedCommunicator._account_gossip = torch.compiler.disable(method)
        SimulatedCommunicator._account_gossip._left_eager = True


def probe(spec: str, n: int, d: int, repeats: int, device: torch.device) -> dict:
    x = torch.randn(n, d, generator=torch.Generator(device=device).manual_seed(0), device=device)
    eager, fused = _choco(spec, x), _choco(spec, x)
    _bookkeeping_left_eager()
    step = torch.compile(fused.step)
    start = time.perf_counter()
    step(None, 0.0)
    compile_s = time.perf_counter() - start
    eager.step(None, 0.0)
    same = bool(torch.allclose(eager.x, fused.x, rtol=1e-4, atol=1e-5))
    target = torch.empty_like(x)
    rounds, compiled, copies = [], [], []
    for _ in range(repeats):  # paired, like benchmark b
        rounds += repeat(lambda: eager.step(None, 0.0), 1, device)
        compiled += repeat(lambda: step(None, 0.0), 1, device)
        copies += repeat(lambda: target.copy_(x), 1, device)
    graphs = torch._dynamo.explain(fused.step)(None, 0.0).graph_count
    med = statistics.median
    return {"spec": spec, "n": n, "d": d, "eager_s": med(rounds), "compiled_s": med(compiled), "copy_s": med(copies),
            "eager_vs_copy": med(r / c for r, c in zip(rounds, copies)),
            "compiled_vs_copy": med(r / c for r, c in zip(compiled, copies)),
            "compile_s": compile_s, "same_state": same, "graphs": graphs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compile_probe.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--d", type=int, default=10**6)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--compressors", nargs="+", default=["sign", "top:0.01", "qsgd:4"])
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    torch._dynamo.config.cache_size_limit = 64
    rows = [probe(spec, args.n, args.d, args.repeats, torch.device(args.device)) for spec in args.compressors]
    for r in rows:
        print(f"{r['spec']:>9}  eager {r['eager_s'] * 1e3:8.2f} ms = {r['eager_vs_copy']:5.2f}x copy   compiled "
              f"{r['compiled_s'] * 1e3:8.2f} ms = {r['compiled_vs_copy']:5.2f}x copy   ({r['graphs']} graphs, "
              f"compile {r['compile_s']:.0f} s, same state: {r['same_state']})")
    if args.out:
        atomic_write_text(Path(args.out), json.dumps({"device": str(args.device), "torch": torch.__version__,
                                                      "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
