"""Group h of `bench perf`: the suite against its peers on the peers' own kind of work, side by side.

A peer is another library that runs the same decentralized method (decent-bench's numpy loop, decent-dp's gloo
processes). It is an optional extra, never installed with the suite: `bench perf --only h --peer NAME=PYTHON`
names the interpreter that has it (decent-bench needs Python >= 3.13). For each comparison the suite exports
one problem from its own task (data, initial models, the gossip matrices, the step size) to a file, runs the
peer's script (in benchmarks/peers/ of the repository's checkout) on it under that interpreter, and refuses to
time a peer whose iterates differ from the suite's. Then both sides run again, alternated, and each repeat gives one paired ratio.

Ratios are speeds, the suite's over the peer's (higher is better: 2 means the suite took half the peer's time):
- ``h.<peer>_<problem>_loop_speed``: the training loop alone (run.json's ``wall_s`` against the peer's own
  loop timer);
- ``h.<peer>_<problem>_process_speed``: the whole process, start-up included, as a user's wall clock sees it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import BenchError
from .timing import figure, ratio_figure

# The peers' scripts run under the peers' interpreters and import nothing of the suite's, so they live outside the
# package, in the checkout: a `bench perf` installed without one has no group h (parse_peers says so).
SCRIPTS = Path(__file__).resolve().parents[2] / "benchmarks" / "peers"


@dataclass(frozen=True)
class Comparison:
    """One problem run by a peer and by the suite, on one or more of the suite's runtimes (its ``sides``)."""
    peer: str
    name: str  # the problem's name in the figures
    sides: dict[str, dict]  # side ("" for a single one, "sim", "dist") -> the `bench run` settings it runs
    export: Callable[[dict, Path], None]  # (settings, file): the problem as the peer reads it
    command: Callable[[str, Path, Path], list[str]]  # (peer python, problem, out json) -> argv
    targets: dict  # (side, "loop_speed" | "process_speed" | "start_s") -> target
    tolerance: float  # largest |x_suite - x_peer| / max |x_suite| accepted
    steps: int  # rounds the problem runs


def _lsq(n: int, dim: int, per_worker: int, steps: int, lr: float) -> dict:
    """Full-batch least squares, D-PSGD on a ring: each worker's batch is its whole fixed shard (data=split),
    so an epoch is one step; evaluated at the start and the end only, as the peer reports its last iterate. The
    run pauses after ``steps`` of ``steps + 1`` epochs (stop_at): a paused run keeps its checkpoint, which
    holds the iterates compared with the peer's, and its loop did the same work as one that completed."""
    return {"task": "lsq", "algorithm": "dpsgd", "compressor": "none", "topology": "ring", "nodes": n,
            "data": "split", "batch_size": per_worker, "epochs": steps + 1, "stop_at": steps, "lr": lr,
            "momentum": 0.0, "nesterov": False, "weight_decay": 0.0, "eval_every": steps,
            "checkpoint_every": steps, "eval_local_workers": 0, "algorithm_options": {"order": "paper"},
            "task_options": {"dim": dim, "n_train": n * per_worker}, "quiet": True}


def _export_lsq(settings: dict, path: Path) -> None:
    import numpy as np

    parts = _build(settings)
    inputs, targets = parts.task.fetch(next(iter(parts.task.batches(0))))  # [n, m, d], [n, m]: every shard
    with open(path, "wb") as handle:  # a handle: np.savez would add .npz to a name without it
        np.savez(handle, A=inputs.double().numpy(), b=targets.double().numpy(), x0=parts.x0.double().numpy(),
                 W=parts.topology.W_at(0), lr=float(settings["lr"]), steps=int(settings["stop_at"]),
                 l2=float(getattr(parts.task.data, "l2", 0.0)))


# MNIST-1D's MLP, D-PSGD at n = 8, batch 32: 15 steps an epoch on 4,000 samples, so 20 epochs are 300 steps. The
# graph is decent-dp's own one-peer exponential graph: worker i averages with i XOR 2^k in round k (weights 1/2),
# which is the suite's Base-2 graph (`base:1`) at a power of two; the suite's `one-peer-exp` is the directed
# i <- i + 2^k, which decent-dp cannot express.
MLP_EPOCHS = 20


def _mlp(backend: str) -> dict:
    return {"task": "mnist1d-mlp", "algorithm": "dpsgd", "compressor": "none", "topology": "base:1", "nodes": 8,
            "batch_size": 32, "epochs": MLP_EPOCHS + 1, "stop_at": MLP_EPOCHS, "lr": 0.05, "momentum": 0.0,
            "nesterov": False, "weight_decay": 0.0, "eval_every": MLP_EPOCHS, "checkpoint_every": MLP_EPOCHS,
            "eval_local_workers": 0, "algorithm_options": {"order": "paper"}, "backend": backend, "quiet": True}


def _export_mlp(settings: dict, path: Path) -> None:
    """The batches every worker takes in the run, in order, with the initial models and each round's W."""
    import numpy as np
    import torch

    parts = _build({**settings, "backend": "sim"})
    task, inputs, targets = parts.task, [], []
    for epoch in range(int(settings["stop_at"])):
        task.start_epoch(epoch)
        for batch in task.batches(epoch):
            xs, ys = task.fetch(batch)
            inputs.append(xs), targets.append(ys)
    topology = parts.topology
    torch.save({"layers": [40, *task.options["hidden"], 10], "x0": parts.x0.clone(),
                "inputs": torch.stack(inputs, 1).contiguous(), "targets": torch.stack(targets, 1).contiguous(),
                "W": torch.from_numpy(np.stack([topology.W_at(k) for k in range(topology.period)])),
                "lr": float(settings["lr"]), "steps": len(inputs)}, path)


def _build(settings: dict):
    from ..run.config import resolve
    from ..run.resolved import resolve_run
    from ..run.setup import build

    return build(resolve_run(resolve({}, {}, settings)))


def _decent_bench(python: str, problem: Path, out: Path) -> list[str]:
    return [python, str(SCRIPTS / "decent_bench_lsq.py"), str(problem), str(out), "--repeats", "1"]


def _decent_dp(python: str, problem: Path, out: Path) -> list[str]:
    # torchrun, as decent-dp's users launch it; --standalone takes a free rendezvous port
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "8",
            str(SCRIPTS / "decent_dp_mlp.py"), str(problem), str(out)]


COMPARISONS = {
    "decent-bench": [
        Comparison("decent-bench", "lsq_n8_d20", {"": _lsq(8, 20, 125, 200, 0.05)}, _export_lsq, _decent_bench,
                   {("", "loop_speed"): 1.0, ("", "process_speed"): 1.0}, 1e-4, 200),
        Comparison("decent-bench", "lsq_n64_d200", {"": _lsq(64, 200, 16, 200, 0.01)}, _export_lsq, _decent_bench,
                   {("", "loop_speed"): 3.0}, 1e-4, 200),
    ],
    "decent-dp": [
        # float32 on both sides, gradients batched (the suite's vmap) against one model a process: 300 steps of
        # last-bit differences stay within 1e-3 of the parameters' scale
        Comparison("decent-dp", "mlp_n8", {"sim": _mlp("sim"), "dist": _mlp("dist")}, _export_mlp, _decent_dp,
                   {("sim", "process_speed"): 3.0, ("dist", "loop_speed"): 1.0, ("dist", "start_s"): 3.0},
                   1e-3, 15 * MLP_EPOCHS),
    ],
}


def parse_peers(specs: list[str] | None) -> dict[str, str]:
    """``--peer NAME=PYTHON`` (repeatable) -> {name: interpreter}; an unknown name or a missing interpreter is
    one line (BenchError)."""
    peers = {}
    for spec in specs or []:
        name, sep, python = spec.partition("=")
        if not sep or not python:
            raise BenchError(f"--peer {spec!r}: expected NAME=PYTHON, e.g. decent-bench=/path/to/python3.13")
        if name not in COMPARISONS:
            raise BenchError(f"--peer {spec!r}: unknown peer {name!r}; known: {', '.join(COMPARISONS)}")
        if not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise BenchError(f"--peer {spec!r}: {python} is not an executable interpreter")
        peers[name] = python
    if peers and not SCRIPTS.is_dir():
        raise BenchError(f"--peer: group h runs the peers' scripts of a checkout of the repository, and {SCRIPTS} "
                         "is not there (run bench perf from a checkout: git clone, then pip install -e .)")
    return peers


def _suite_run(settings: dict, out: Path) -> tuple[float, float, "torch.Tensor"]:
    """`bench run` in a fresh process: (whole-process seconds, loop seconds from run.json, final x [n, d]; under
    dist each rank's checkpoint holds its own workers' rows)."""
    import torch

    argv = [sys.executable, "-m", "bench", "run", "--settings", json.dumps(settings), "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    whole = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the suite's run failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    loop = json.loads((out / "run.json").read_text())["final"]["wall_s"]
    files = [out / "checkpoint.pt"] if settings.get("backend", "sim") == "sim" else sorted(
        out.glob("checkpoint-rank*.pt"), key=lambda f: int(f.stem.split("rank")[1]))
    x = torch.cat([torch.load(f, weights_only=True)["algo"]["x"] for f in files])
    return whole, loop, x


def _peer_run(comparison: Comparison, python: str, problem: Path,
              out: Path) -> tuple[float, float, "torch.Tensor", dict]:
    """The peer's script in its interpreter: (whole-process seconds, its loop seconds, final x, its JSON)."""
    import torch

    for attempt in (1, 2):  # torchrun's rendezvous on a busy 2-core machine once in a while fails to start
        start = time.perf_counter()
        done = subprocess.run(comparison.command(python, problem, out), capture_output=True, text=True)
        whole = time.perf_counter() - start
        if done.returncode == 0 or attempt == 2:
            break
        print(f"h  {comparison.peer} failed on {comparison.name} (exit {done.returncode}); trying once more: "
              f"{done.stderr.strip()[-300:]}", file=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"peer {comparison.peer} failed on {comparison.name} (exit {done.returncode}): "
                           f"{done.stderr.strip()[-500:]}")
    result = json.loads(out.read_text())
    loop = result["loop_s"][-1] if isinstance(result["loop_s"], list) else result["loop_s"]
    return whole, loop, torch.tensor(result["x"], dtype=torch.float64), result


def disagreement(suite_x, peer_x) -> float:
    """max |x_suite − x_peer| relative to max |x_suite| (inf where the shapes differ)."""
    if tuple(suite_x.shape) != tuple(peer_x.shape):
        return float("inf")
    suite_x = suite_x.double()
    peer_x = peer_x.double()
    return float((suite_x - peer_x).abs().max() / suite_x.abs().max().clamp_min(1e-30))


def compare(comparison: Comparison, python: str, repeats: int, progress=print) -> dict[str, dict]:
    """Check the peer's iterates against each side of the suite, then ``repeats`` alternated rounds of runs (the
    peer, then each side): the figures, each ratio from one round's pair."""
    runs: dict[str, list] = {side: [] for side in ("peer", *comparison.sides)}
    gaps: dict[str, float] = {}
    info: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        problem = tmp / "problem.bin"
        comparison.export(next(iter(comparison.sides.values())), problem)
        for r in range(repeats + 1):  # round 0 checks the answers (and warms the caches): not timed
            whole, loop, peer_x, info = _peer_run(comparison, python, problem, tmp / f"peer{r}.json")
            timed = {"peer": (whole, loop)}
            for side, settings in comparison.sides.items():
                whole, loop, x = _suite_run(settings, tmp / f"suite{side}{r}")
                timed[side] = (whole, loop)
                if r == 0:
                    gaps[side] = disagreement(x, peer_x)
                    if not gaps[side] <= comparison.tolerance:
                        raise RuntimeError(f"peer {comparison.peer} disagrees with the suite{' (' + side + ')' if side else ''} "
                                           f"on {comparison.name}: max |x_suite - x_peer| = {gaps[side]:.2e} of max |x|, "
                                           f"above {comparison.tolerance:g}; not timed")
            if r:
                for side, pair in timed.items():
                    runs[side].append(pair)
    return _figures(comparison, runs, gaps, info, progress)


def _figures(comparison: Comparison, runs: dict, gaps: dict, info: dict, progress) -> dict[str, dict]:
    nodes = next(iter(comparison.sides.values()))["nodes"]  # every side runs the same problem
    work = nodes * comparison.steps  # worker-steps of a run
    peer_whole, peer_loop = ([pair[i] for pair in runs["peer"]] for i in (0, 1))
    label = f"h.{comparison.peer.replace('-', '_')}_{comparison.name}"
    extra = {"peer": info.get("peer", comparison.peer), "nodes": nodes, "steps": comparison.steps}
    figures = {f"{label}_peer_loop": figure([work / t for t in peer_loop], "worker-steps/s", True, "absolute", **extra),
               f"{label}_peer_process_s": figure(peer_whole, "s", False, "absolute", **extra)}
    said = []
    for side in comparison.sides:
        whole, loop = ([pair[i] for pair in runs[side]] for i in (0, 1))
        name = f"{label}_{side}_" if side else f"{label}_"
        target = lambda kind: comparison.targets.get((side, kind))  # noqa: E731
        more = {**extra, "agreement": gaps[side], "settings": comparison.sides[side]}
        figures[f"{name}loop_speed"] = ratio_figure(peer_loop, loop, f"x {comparison.peer}'s loop speed", True,
                                                    target=target("loop_speed"), **more)
        figures[f"{name}process_speed"] = ratio_figure(peer_whole, whole, f"x {comparison.peer}'s whole process",
                                                       True, target=target("process_speed"), **more)
        figures[f"{name}suite_loop"] = figure([work / t for t in loop], "worker-steps/s", True, "absolute", **extra)
        figures[f"{name}suite_process_s"] = figure(whole, "s", False, "absolute", **extra)
        # what the run pays outside its loop: imports, data, building, and under dist starting the ranks
        figures[f"{name}suite_start_s"] = figure([w - t for w, t in zip(whole, loop)], "s", False, "absolute",
                                                 target=target("start_s"), **extra)
        said.append(f"{side or 'suite'}: loop {figures[f'{name}loop_speed']['median']:.2f}x, whole process "
                    f"{figures[f'{name}process_speed']['median']:.2f}x (agree to {gaps[side]:.1e})")
    progress(f"h  {comparison.peer} {comparison.name}, the suite's speed over the peer's: " + "; ".join(said))
    return figures


def measure(peers: dict[str, str], repeats: int, progress=print) -> dict[str, dict]:
    figures: dict[str, dict] = {}
    for name, python in peers.items():
        for comparison in COMPARISONS[name]:
            figures.update(compare(comparison, python, repeats, progress))
    return figures
