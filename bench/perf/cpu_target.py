"""Benchmark g of `bench perf`, the CPU target, measurable on every machine: ResNet-8 at n = 64, batch 4 per
worker. The vectorised gradient step (fetch + augmentation + the gradients of all workers) is at least 1.4x
faster than the per-worker loop, and a short real run (`bench run`, Choco-sign on a ring) gives the same
metrics on the two paths: test accuracies within 0.01, losses within 1e-3 relative.
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pandas as pd

from .timing import figure, ratio_figure
from .training import CIFAR_RUN, Stepper, paired_times, write_cifar_files

# the short run: 2 epochs of 5 steps; enough test images that one flipped prediction moves accuracy < 0.01
FULL = {"model": "resnet8", "n": 64, "batch": 4, "run_epochs": 2, "run_train_images": 1280, "run_test_images": 512}
QUICK = {"model": "resnet8", "n": 4, "batch": 2, "run_epochs": 2, "run_train_images": 40, "run_test_images": 200}
SPEEDUP_TARGET = 1.4  # at FULL's model, n and batch only
ACC_TOLERANCE = 0.01  # absolute, test accuracies of the averaged and of the local models
LOSS_TOLERANCE = 1e-3  # relative, training and test losses
ACC_COLUMNS = ("test_acc", "local_test_acc_mean")
LOSS_COLUMNS = ("train_loss", "train_loss_workers", "test_loss")


def gradient_speedup(spec: dict, root: Path, work: Path, repeats: int, device: str) -> dict[str, dict]:
    settings = {**CIFAR_RUN, "task": f"cifar10-{spec['model']}", "data_root": str(root), "nodes": spec["n"],
                "batch_size": spec["batch"]}
    steppers = {name: Stepper({**settings, "task_options": {"vectorize": value}}, work / f"g-{name}", device)
                for name, value in (("vectorized", True), ("loop", False))}
    times = paired_times({name: s.gradients for name, s in steppers.items()}, repeats, device)
    size = {"model": spec["model"], "n": spec["n"], "batch": spec["batch"]}
    paths = {name: s.path()["path"] for name, s in steppers.items()}
    at_target = all(spec[k] == FULL[k] for k in ("model", "n", "batch"))
    prefix = f"g.{spec['model']}_n{spec['n']}"
    return {
        f"{prefix}_vectorized_speedup": ratio_figure(
            times["loop"], times["vectorized"], "x faster than the loop (gradient step)", True, **size,
            paths=paths, **({"target": SPEEDUP_TARGET} if at_target else {})),
        f"{prefix}_vectorized_s": figure(times["vectorized"], "s/gradient step", False, "absolute", **size,
                                         path=paths["vectorized"]),
        f"{prefix}_loop_s": figure(times["loop"], "s/gradient step", False, "absolute", **size, path=paths["loop"]),
    }


def short_run(spec: dict, root: Path, out: Path, vectorize: bool, device: str) -> tuple[pd.DataFrame, str]:
    """A real run (``bench.run.start``, what `bench run` does, in this process); its metrics and the gradient
    path it took."""
    from ..run import start

    settings = {"task": f"cifar10-{spec['model']}", **CIFAR_RUN, "nodes": spec["n"],
                "epochs": spec["run_epochs"], "seed": 0, "device": device, "quiet": True,
                "batch_size": spec["batch"], "data_root": str(root), "task_options": {"vectorize": vectorize}}
    code = start(settings, out)
    if code != 0:
        raise RuntimeError(f"the run with vectorize={vectorize} exited {code}: {settings}")
    info = json.loads((out / "run.json").read_text())
    return pd.read_parquet(out / "metrics.parquet"), info["task"]["gradient_path"]["path"]


def _largest_difference(a: pd.DataFrame, b: pd.DataFrame, columns: tuple[str, ...], relative: bool) -> float:
    """The largest difference over the rows (same steps) and columns; a value missing on one side only is inf."""
    worst = 0.0
    for col in columns:
        for x, y in zip(a[col], b[col]):
            if math.isnan(x) and math.isnan(y):
                continue
            diff = abs(x - y) / max(abs(x), abs(y), 1e-12) if relative else abs(x - y)
            worst = max(worst, diff if not math.isnan(diff) else math.inf)
    return worst


def run_agreement(spec: dict, root: Path, work: Path, device: str) -> dict[str, dict]:
    vec, vec_path = short_run(spec, root, work / "run-vectorized", True, device)
    loop, loop_path = short_run(spec, root, work / "run-loop", False, device)
    if list(vec["step"]) != list(loop["step"]):
        raise RuntimeError(f"the two runs evaluated at different steps: {list(vec['step'])} vs {list(loop['step'])}")
    extra = {"model": spec["model"], "n": spec["n"], "batch": spec["batch"], "epochs": spec["run_epochs"],
             "steps": int(vec["step"].iloc[-1]), "evaluations": len(vec),
             "paths": {"vectorize=true": vec_path, "vectorize=false": loop_path}}
    prefix = f"g.{spec['model']}_n{spec['n']}_run"
    return {
        f"{prefix}_acc_difference": figure([_largest_difference(vec, loop, ACC_COLUMNS, False)],
                                           "abs. difference", False, "absolute", target=ACC_TOLERANCE,
                                           columns=list(ACC_COLUMNS), **extra),
        f"{prefix}_loss_difference": figure([_largest_difference(vec, loop, LOSS_COLUMNS, True)],
                                            "rel. difference", False, "absolute", target=LOSS_TOLERANCE,
                                            columns=list(LOSS_COLUMNS), **extra),
    }


def measure(spec: dict, repeats: int, device: str, progress=print) -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = write_cifar_files(work / "data", max(spec["run_train_images"], 2 * spec["n"] * spec["batch"]),
                                 spec["run_test_images"])
        figures = gradient_speedup(spec, root, work, repeats, device)
        prefix = f"g.{spec['model']}_n{spec['n']}"
        speedup = figures[f"{prefix}_vectorized_speedup"]
        progress(f"g  {spec['model']} n={spec['n']} × {spec['batch']} gradient step: {speedup['paths']['vectorized']} "
                 f"{figures[f'{prefix}_vectorized_s']['median']:.3f} s, {speedup['paths']['loop']} "
                 f"{figures[f'{prefix}_loop_s']['median']:.3f} s ({speedup['median']:.2f}x)")
        figures.update(run_agreement(spec, root, work, device))
    acc, loss = figures[f"{prefix}_run_acc_difference"], figures[f"{prefix}_run_loss_difference"]
    progress(f"g  {acc['steps']}-step run, vectorize=true vs false: test accuracies differ by at most "
             f"{acc['median']:.3g}, losses by {loss['median']:.3g} relative")
    return figures
