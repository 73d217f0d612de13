"""The quick set of one checkout and its record: `bench perf --quick` of the code under test (run_perf),
the tracking study of config/track.yaml (load_study, select_cells, run_study: every run with one thread
and a private cache, then `python -m analysis summarize` of this checkout), and track_one, which runs the
parts asked for and writes one record to <out>/<machine>/<commit>/<UTC time>.json (1 when a part failed)."""
from __future__ import annotations

import csv
import fnmatch
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..errors import BenchError
from ..cache import ENV as CACHE_ENV
from ..files import write_new
from bench.cpu_meter import CpuMeter
from .scratch import scratch_dir
from .userpart import run_user
from .record import KIND, ROOT, VERSION, tracker_state, with_tracker

STUDY_FIELDS = ("final_test_acc", "epochs_to_target", "bits_to_target", "time_to_target_s")


# -- the two parts ----------------------------------------------------------------------------------------
def _code_env(repo: Path, **extra: str) -> dict[str, str]:
    """The environment of a process that runs the code under test: ``repo`` first on the path."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(repo), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    return env


def _last_line(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return (lines[-1] if lines else "(empty log)")[:300]


def run_perf(repo: Path, work: Path, device: str, only: str | None,
             say: Callable[[str], None]) -> tuple[dict, list[str]]:
    """`bench perf --quick` of ``repo``: (its part of the record, errors)."""
    out = work / "perf"
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "bench", "perf", "--quick", "--quiet", "--device", device, "--out-dir", str(out),
           "--name", "perf", *(["--only", only] if only else [])]
    log = work / "logs" / "perf.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with open(log, "w") as handle:
        proc = subprocess.run(cmd, cwd=repo, env=_code_env(repo), stdout=handle, stderr=subprocess.STDOUT)
    seconds = round(time.monotonic() - start, 1)
    part: dict[str, Any] = {"command": "bench perf --quick" + (f" --only {only}" if only else ""), "wall_s": seconds}
    if proc.returncode != 0:
        return part, [f"perf: bench perf exited {proc.returncode}: {_last_line(log)}"]
    try:
        result = json.loads((out / "perf.json").read_text())
        figures = result["figures"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return part, [f"perf: no readable perf.json ({err})"]
    keep = ("values", "median", "min", "max", "unit", "kind", "higher_is_better", "target")
    part.update(sizes=result.get("sizes"), load_average_1m=(result.get("machine") or {}).get("load_average_1m"),
                torch_threads=(result.get("machine") or {}).get("torch_threads"),
                figures={name: {k: fig[k] for k in keep if k in fig} for name, fig in figures.items()})
    say(f"track: perf --quick: {len(figures)} figures in {seconds:.0f} s")
    return part, []


def load_study(path: str):
    from ..pipeline import Study
    from .. import yamlio

    config = yamlio.read_yaml(path, f"--config {path}", "a study YAML file")  # no aliases, tags or deep nesting
    if not isinstance(config, dict) or "study" not in config or "blocks" not in config:
        raise BenchError(f"--config {path}: not a study (a mapping with study: and blocks:)")
    study = Study(config)
    if study.tuned_cells:
        raise BenchError(f"--config {path}: cells {', '.join(sorted(study.tuned_cells))} are tuned; a tracking study "
                         "fixes every setting (no tune: grid)")
    digest = hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return study, digest


def select_cells(study, patterns: str | None) -> list[str]:
    cells = list(study.cells)
    if not patterns:
        return cells
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen = [c for c in cells if any(fnmatch.fnmatchcase(c, p) for p in wanted)]
    if not chosen:
        raise BenchError(f"--cells {patterns!r} matches none of the study's cells: {', '.join(cells)}")
    return chosen


def _number(text: str | None):
    """A summary.csv number as a record keeps it: inf as "inf", NaN or empty as null."""
    if text is None or text == "":
        return None
    value = float(text)
    if math.isnan(value):
        return None
    return "inf" if math.isinf(value) else value


def run_study(repo: Path, work: Path, study, digest: str, cells: list[str], target_acc: float,
              say: Callable[[str], None]) -> tuple[dict, list[str]]:
    """Every run of ``cells`` (one at a time, one thread each), then `python -m analysis summarize` of this
    checkout: (the study's part of the record, errors)."""
    runs_dir, logs = work / "study" / "runs", work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = _code_env(repo, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **{CACHE_ENV: str(work / "cache")})
    runs = [(run, settings) for run, settings in study.runs.items() if study.run_cell[run] in cells]
    errors: list[str] = []
    start = time.monotonic()
    say(f"track: study: {len(runs)} runs of {len(cells)} cells, one at a time")
    for i, (run, settings) in enumerate(runs, 1):
        words = [sys.executable if w == "python" else w for w in study.launcher(settings)]
        cmd = [*words, *study.run_args(settings), "--out", str(runs_dir / run)]
        t0 = time.monotonic()
        with open(logs / f"{run}.log", "w") as handle:
            proc = subprocess.run(cmd, cwd=repo, env=env, stdout=handle, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            errors.append(f"study: {run}: bench run exited {proc.returncode}: {_last_line(logs / f'{run}.log')}")
        say(f"track: study run {i}/{len(runs)} {run}: {'ok' if proc.returncode == 0 else 'FAILED'} "
            f"({time.monotonic() - t0:.0f} s)")
    part: dict[str, Any] = {"name": study.name, "config_digest": digest, "target_acc": target_acc,
                            "seeds": list(study.seeds), "cells": {}}
    rows: dict[str, dict] = {}
    if any((runs_dir / run / "run.json").is_file() for run, _ in runs):
        cmd = [sys.executable, "-m", "analysis", "summarize", str(work / "study"), "--target-acc", repr(target_acc)]
        with open(logs / "summarize.log", "w") as handle:
            proc = subprocess.run(cmd, cwd=ROOT, env=_code_env(ROOT), stdout=handle, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            errors.append(f"study: analysis summarize exited {proc.returncode}: {_last_line(logs / 'summarize.log')}")
        else:
            with open(work / "study" / "summary.csv", newline="") as handle:
                rows = {Path(row["path"]).name: row for row in csv.DictReader(handle)}
    for cell in cells:
        entry: dict[str, Any] = {"settings": study.cells[cell], "seeds": [], "status": [], "tta_status": [],
                                 **{field: [] for field in STUDY_FIELDS}}
        for seed in study.seeds:
            row = rows.get(f"{cell}_s{seed}")
            entry["seeds"].append(seed)
            entry["status"].append(row["status"] if row else "failed")
            entry["tta_status"].append(row.get("tta_status") if row else None)
            for field in STUDY_FIELDS:
                entry[field].append(_number(row.get(field)) if row else None)
        part["cells"][cell] = entry
    part["wall_s"] = round(time.monotonic() - start, 1)
    return part, errors



def settle(seconds: float, say, per_core: float = 1.0, poll: float = 5.0, load=os.getloadavg) -> float:
    """Wait at most ``seconds`` for the 1-minute load average to fall to ``per_core`` x cores: a test suite
    or build that just ended still weighs on it for a minute or two, and bench perf's timings (and the
    load it records, which `analysis history --max-load` reads) are the machine's then. The load seen last."""
    limit, deadline = per_core * (os.cpu_count() or 1), time.monotonic() + seconds
    current = load()[0]
    if current > limit and seconds > 0:
        say(f"track: load average {current:.2f} above {limit:g}: waiting for it to settle (at most {seconds:g} s)")
    while current > limit and time.monotonic() < deadline:
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        current = load()[0]
    return current


def track_one(repo: Path, args, commit: dict, parts, study, digest, cells, machine, info, say,
              keep_as: str | None = None) -> int:
    """The quick set of the checkout ``repo``: one record written; 1 when a part failed, else 0. The record is
    dirty when ``repo`` or the tracker's checkout (whose code reads the study) is not its commit."""
    tracker = tracker_state(repo)
    commit = with_tracker(commit, tracker)
    out_root = Path(args.out)
    started = datetime.now(timezone.utc)
    wall0 = time.monotonic()
    load_start = os.getloadavg()[0]
    say(f"track: {commit['describe']} ({commit['commit'][:12]}{', dirty' if commit['dirty'] else ''}) on {machine}"
        f" -> {out_root / machine / commit['commit']}/")
    if args.keep:
        work = Path(args.keep).resolve() / (keep_as or "")
    else:
        work = scratch_dir("choco-track-")
    work.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"kind": KIND, "version": VERSION, **commit, "machine": {"id": machine, **info},
                              "started": started.isoformat(timespec="seconds"),
                              "tracker": tracker,
                              "parts": parts, "errors": []}
    try:
        if "perf" in parts:
            if getattr(args, "settle", 0):
                settle(args.settle, say)
            say(f"track: perf --quick{f' --only {args.perf_only}' if args.perf_only else ''}: started")
            with CpuMeter() as meter:  # what other processes took of the machine while bench perf timed
                record["perf"], errors = run_perf(repo, work, args.device, args.perf_only, say)
            record["perf"]["contention"] = meter.result
            if meter.result.get("others_cpu_share", 0) > 0.1:
                say(f"track: other processes took {meter.result['others_cpu_share']:.0%} of the machine's CPU while "
                    "bench perf timed (analysis history --max-busy leaves such records' perf figures out)")
            record["errors"] += errors
        if "user" in parts:
            say(f"track: your benchmarks: {len(args.benchmark_files)} files, started")
            record["user"], errors = run_user(repo, work, args.benchmark_files, _code_env(repo), say)
            record["errors"] += errors
        if "study" in parts:
            record["study"], errors = run_study(repo, work, study, digest, cells, args.target_acc, say)
            record["errors"] += errors
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    record["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    record["wall_s"] = round(time.monotonic() - wall0, 1)
    record["load_average_1m"] = {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)}
    folder = out_root / machine
    if not (folder / "machine.json").exists():
        write_new(folder, "machine", json.dumps({"kind": f"{KIND}-machine", "id": machine, **info}, indent=1) + "\n",
                  only_name=True)
    path = write_new(folder / commit["commit"], started.strftime("%Y%m%dT%H%M%SZ"),
                     json.dumps(record, indent=1, sort_keys=True) + "\n")
    for line in record["errors"]:
        print(f"track: error: {line}", file=sys.stderr)
    n_perf = len((record.get("perf") or {}).get("figures") or {})
    n_cells = len((record.get("study") or {}).get("cells") or {})
    n_user = len((record.get("user") or {}).get("figures") or {})
    failed = f", {len(record['errors'])} errors" if record["errors"] else ""
    print(f"wrote {path} ({commit['describe']}, {n_perf} perf figures, {n_cells} cells x "
          f"{len(study.seeds) if study else 0} seeds{f', {n_user} of your benchmarks' if n_user else ''}, "
          f"{record['wall_s']:.0f} s{failed})", flush=True)
    return 1 if record["errors"] else 0
