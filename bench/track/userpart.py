"""The user part of `bench track`: the user's own benchmark files (asv's format, bench/track/benchfile.py),
timed in the checkout under test, so that their own training code or any number it computes is tracked over
commits beside the suite's quick set. The files are the tracker's, the same for every commit measured, as
asv keeps its benchmarks apart from the code they time: a history of a range measures every commit with one
set of benchmarks, and their digest is part of the record's settings (a changed benchmark starts a new
series instead of reading as a regression)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import BenchError
from .contention import CpuMeter
from .record import ROOT

RUNNER = ROOT / "bench" / "track" / "benchfile.py"


def benchmark_files(paths: list[str]) -> list[Path]:
    """The .py files named (a folder: its *.py files, sorted), resolved; one line for anything else."""
    files: list[Path] = []
    for text in paths:
        path = Path(text).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.glob("*.py") if not p.name.startswith(("_", ".")))
            if not found:
                raise BenchError(f"--benchmarks {text}: no .py files in that folder")
            files += found
        elif path.is_file() and path.suffix == ".py":
            files.append(path)
        else:
            raise BenchError(f"--benchmarks {text}: not a .py file or a folder of them")
    stems = [p.stem for p in files]
    twice = sorted({s for s in stems if stems.count(s) > 1})
    if twice:
        raise BenchError(f"--benchmarks: two files named {twice[0]}.py (a figure is named by its file's stem)")
    return [p.resolve() for p in files]


def digest(files: list[Path]) -> str:
    h = hashlib.sha1()
    for path in files:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def run_user(repo: Path, work: Path, files: list[Path], env: dict, say: Callable[[str], None]) -> tuple[dict, list[str]]:
    """The benchmark files run in ``repo`` (its code first on the path, ``env``): (the record's part, errors)."""
    out, log = work / "user.json", work / "logs" / "user.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with CpuMeter() as meter, open(log, "w") as handle:
        proc = subprocess.run([sys.executable, str(RUNNER), str(out), *map(str, files)], cwd=repo, env=env,
                              stdout=handle, stderr=subprocess.STDOUT)
    part: dict[str, Any] = {"files": [p.name for p in files], "digest": digest(files),
                            "wall_s": round(time.monotonic() - start, 1), "contention": meter.result, "figures": {}}
    try:
        result = json.loads(out.read_text())
    except (OSError, ValueError) as err:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        return part, [f"user: the benchmark runner exited {proc.returncode} ({err}): {' '.join(tail)[:200]}"]
    part["figures"] = result.get("figures") or {}
    say(f"track: benchmarks: {len(part['figures'])} figures from {len(files)} files in {part['wall_s']:.0f} s")
    return part, [f"user: {line}" for line in result.get("errors") or []]
