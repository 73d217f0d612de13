"""`bench perf`: the fixed benchmark set (a-e: suite.py; f, the training step: training.py; g, the CPU
target: cpu_target.py; h, the peers side by side: peers.py), a table, and results/perf/<name>.json."""
from __future__ import annotations

import json
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

import torch

from ..errors import BenchError
from ..files import atomic_write_text, inside, plain_name
from . import cpu_target, peers, suite, training
from .timing import ratio_figure

FULL = {"procs_n": [4, 8, 16], "sim_only_n": [64], "steps": 20, "repeats": 3, "round_n": 64, "round_d": 10**6,
        "round_repeats": 5, "overhead_n": 64, "overhead_repeats": 9, "memory_n": 64, "resnet_n": 64,
        "resnet_batch": 32}
# the quick set is what `bench track` measures, and its sizes are the tracked settings: any change to QUICK (a key
# added with the value it had included) starts the tracked history over (tests/test_perf.py)
QUICK = {"procs_n": [4], "sim_only_n": [8], "steps": 3, "repeats": 2, "round_n": 8, "round_d": 10**4,
         "round_repeats": 2, "overhead_n": 8, "memory_n": 8, "resnet_n": 2, "resnet_batch": 2}
COMPRESSORS = ("sign", "top:0.01", "qsgd:4", "rand:0.01")
ROUND_TARGETS = {"sign": 8.0, "top:0.01": 8.0, "qsgd:4": 8.0}  # issue 31's kernels; random-k is timed beside them
GROUPS = "abcdefgh"  # the benchmark groups of run_suite


def output_path(out_dir: str, name: str) -> Path:
    """Where ``--name`` is written: out_dir/NAME.json, NAME a plain file name (never '../x'), the
    path checked to stay inside out_dir (a link there pointing elsewhere is refused too)."""
    out = Path(out_dir) / f"{plain_name(name, '--name')}.json"
    inside(out_dir, out)
    return out


def groups(only: str | None, default: set[str]) -> set[str]:
    """The groups ``--only`` names (comma list), or ``default``; an unknown one is refused."""
    if only is None:
        return default
    chosen = {g.strip() for g in only.split(",")}
    unknown = sorted(chosen - set(GROUPS))
    if unknown:
        raise BenchError(f"--only {only!r}: unknown group {', '.join(map(repr, unknown))}; allowed: "
                         f"{', '.join(GROUPS)} (comma list)")
    return chosen


def sizes_for(device: torch.device, quick: bool) -> dict:
    """The sizes of every group; f runs at the paper's sizes on CUDA and scaled down on CPU (training.py)."""
    if quick:
        return {**QUICK, **training.QUICK, "cpu_target": cpu_target.QUICK}
    return {**FULL, **(training.PAPER if device.type == "cuda" else training.CPU), "cpu_target": cpu_target.FULL}


def machine(device: torch.device, load_at_start: float) -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "device": str(device),
            # other jobs on the machine skew every figure (the per-worker loops most: OpenMP threads spin)
            "load_average_1m": {"start": round(load_at_start, 2), "end": round(os.getloadavg()[0], 2)}}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def run_suite(device: str, sizes: dict, only: set[str], progress=print, peer_pythons: dict | None = None) -> dict:
    figures: dict[str, dict] = {}
    if "a" in only:
        for n in sizes["procs_n"] + sizes["sim_only_n"]:
            figures[f"a.sim_throughput_n{n}"] = suite.throughput_sim(n, sizes["steps"], sizes["repeats"], device)
            progress(f"a  simulated n={n}: {figures[f'a.sim_throughput_n{n}']['median']:.0f} worker-steps/s")
        if device == "cpu":
            for n in sizes["procs_n"]:
                figures[f"a.proc_throughput_n{n}"] = suite.throughput_processes(n, sizes["steps"], sizes["repeats"])
                sim, proc = figures[f"a.sim_throughput_n{n}"], figures[f"a.proc_throughput_n{n}"]
                figures[f"a.speedup_n{n}"] = ratio_figure(sim["values"], proc["values"], "x per-process", True,
                                                          target=5.0 if n == 16 else None)
                progress(f"a  {n} gloo processes: {proc['median']:.0f} worker-steps/s "
                         f"(simulated {figures[f'a.speedup_n{n}']['median']:.1f}x faster)")
    if "b" in only:
        for spec in COMPRESSORS:
            ratio, seconds = suite.communication_round(spec, sizes["round_n"], sizes["round_d"],
                                                       sizes["round_repeats"], device, ROUND_TARGETS.get(spec))
            figures[f"b.round_vs_copy_{spec}"] = ratio
            figures[f"b.round_seconds_{spec}"] = seconds
            progress(f"b  round {spec} n={sizes['round_n']} d={sizes['round_d']}: {seconds['median'] * 1e3:.1f} ms "
                     f"= {ratio['median']:.2f}x one copy")
    if "c" in only:
        bare, stepped = suite.overhead(sizes["overhead_n"], sizes["steps"],
                                       sizes.get("overhead_repeats", sizes["repeats"]), device)
        figures["c.overhead_choco_sign"], figures["c.overhead_choco_sign_same_local_step"] = bare, stepped
        progress(f"c  Choco-sign step / local SGD step at n={sizes['overhead_n']}: {bare['median']:.3f}x "
                 f"(with the same momentum and weight decay: {stepped['median']:.3f}x)")
    if "e" in only:
        speedup, fast, slow = suite.resnet_vectorised_vs_loop(sizes["resnet_n"], sizes["resnet_batch"],
                                                               sizes["repeats"], device)
        figures["e.resnet20_vmap_speedup"], figures["e.resnet20_vmap_s"], figures["e.resnet20_loop_s"] = speedup, fast, slow
        progress(f"e  ResNet-20 gradients, n={sizes['resnet_n']}: vmap {fast['median']:.3f} s, loop "
                 f"{slow['median']:.3f} s ({speedup['median']:.2f}x)")
    if "f" in only:
        figures.update(training.resnet_steps(sizes, sizes["repeats"], device, progress))
        figures.update(training.lstm_steps(sizes, sizes["repeats"], device, progress))
    if "g" in only:
        figures.update(cpu_target.measure(sizes["cpu_target"], sizes["repeats"], device, progress))
    if "h" in only:
        figures.update(peers.measure(peer_pythons or {}, sizes["repeats"], progress))
    if "d" in only:
        figures["d.peak_memory"] = suite.peak_memory(sizes["memory_n"], sizes["steps"], device)
        progress(f"d  peak memory n={sizes['memory_n']}: {figures['d.peak_memory']['median']:.2f} GiB")
    return figures


def table(figures: dict) -> str:
    lines = [f"{'figure':<40}{'min':>12}{'median':>12}{'max':>12}  unit (target)"]
    for name, fig in figures.items():
        target = fig.get("target")
        mark = ""
        if target is not None:
            ok = fig["median"] >= target if fig["higher_is_better"] else fig["median"] <= target
            mark = f" ({'<=' if not fig['higher_is_better'] else '>='} {target:g}: {'met' if ok else 'MISSED'})"
        lines.append(f"{name:<40}{fig['min']:>12.4g}{fig['median']:>12.4g}{fig['max']:>12.4g}  {fig['unit']}{mark}")
    return "\n".join(lines)


def cmd_perf(args) -> int:
    from ..run.setup import device_of

    out = output_path(args.out_dir, args.name)  # checked before minutes of benchmarks, not after
    device = device_of(args.device)
    sizes = sizes_for(device, args.quick)
    # e (ResNet-20 at n = 64, vectorised vs loop) is GPU-sized: part of the default set on CUDA and --quick
    default = {"a", "b", "c", "d", "f", "g"} | ({"e"} if device.type == "cuda" or args.quick else set())
    peer_pythons = peers.parse_peers(getattr(args, "peer", None))
    only = groups(args.only, default | ({"h"} if peer_pythons else set()))
    if "h" in only and not peer_pythons:
        raise BenchError("group h compares with peer libraries: name one with --peer NAME=PYTHON, e.g. "
                         "--peer decent-bench=/path/to/python3.13 (docs/performance.md)")
    load_at_start = os.getloadavg()[0]
    figures = run_suite(args.device, sizes, only, progress=(lambda *_: None) if args.quiet else print,
                        peer_pythons=peer_pythons)
    result = {"name": args.name, "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(device, load_at_start), "sizes": sizes, "figures": figures}
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=2))
    print(table(figures))
    print(f"wrote {out}")
    return 0
