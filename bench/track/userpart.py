"""The user part of `bench track`: the user's own benchmark files (asv's format, bench/track/benchfile.py),
timed in the checkout under test, so that their own training code or any number it computes is tracked over
commits beside the suite's quick set. The files are the tracker's, the same for every commit measured, as
asv keeps its benchmarks apart from the code they time: a history of a range measures every commit with one
set of benchmarks, and their digest is part of the record's settings (a changed benchmark starts a new
series instead of reading as a regression). The runner reports each benchmark in a journal as it starts and
ends; one that outlives its timeout by GRACE_S (a hang the runner's alarm cannot stop) gets the runner's
process group killed, its error line, and a new runner that carries on after it."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ..errors import BenchError
from .benchfile import collect, read_journal, timed_out
from bench.cpu_meter import CpuMeter
from .record import ROOT

RUNNER = ROOT / "bench" / "track" / "benchfile.py"
GRACE_S = 5.0  # past a benchmark's timeout before the runner is killed: its own alarm says it first, if it can
POLL_S = 0.2  # how often the journal is read while the runner runs


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
    journal, log = work / "user.jsonl", work / "logs" / "user.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    problem = None
    with CpuMeter() as meter, open(log, "w") as handle:
        while problem is None:
            status = _watch([sys.executable, str(RUNNER), str(journal), *map(str, files)], repo, env, handle, journal)
            events = read_journal(journal)
            if any(e.get("done") for e in events):
                break
            problem = _stopped(journal, events, status, log)
    part: dict[str, Any] = {"files": [p.name for p in files], "digest": digest(files),
                            "wall_s": round(time.monotonic() - start, 1), "contention": meter.result, "figures": {}}
    result = collect(read_journal(journal))
    part["figures"] = result["figures"]
    say(f"track: benchmarks: {len(part['figures'])} figures from {len(files)} files in {part['wall_s']:.0f} s")
    return part, [f"user: {line}" for line in [*result["errors"], *([problem] if problem else [])]]


def _open_start(events: list[dict]) -> tuple[int, dict] | None:
    """(index, event) of the benchmark (or import) the runner started last and has not ended."""
    for i in range(len(events) - 1, -1, -1):
        if "end" in events[i]:
            return None
        if "start" in events[i]:
            return i, events[i]
    return None


def _watch(cmd: list[str], repo: Path, env: dict, handle, journal: Path) -> int | str:
    """Run the runner in a process group of its own until it exits (its status) or the benchmark it is on outlives
    its timeout by GRACE_S ("timeout"); the whole group is killed after either, so no child is left behind."""
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    seen: tuple | None = None  # (journal index, when this process first saw it) of the open start
    try:
        while True:
            try:
                return proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
            current = _open_start(read_journal(journal))
            if current is None or seen is None or seen[0] != current[0]:
                seen = None if current is None else (current[0], time.monotonic())
            elif time.monotonic() - seen[1] > float(current[1].get("timeout", 0)) + GRACE_S:
                return "timeout"
    finally:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner's session: what its benchmarks started goes too
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _stopped(journal: Path, events: list[dict], status: int | str, log: Path) -> str | None:
    """After the runner ended without its closing event: the benchmark it was on gets its error line in the
    journal (the next runner carries on after it) and None; a problem line when it was on none."""
    current = _open_start(events)
    tail = " ".join(log.read_text(errors="replace").strip().splitlines()[-1:])[:200] if log.exists() else ""
    if current is None:
        return f"the benchmark runner exited {status} outside any benchmark: {tail}".rstrip(": ")
    name, timeout = current[1]["start"], float(current[1].get("timeout", 0))
    line = timed_out(name, timeout) if status == "timeout" else f"{name}: the benchmark runner exited {status} in it"
    cut = journal.read_bytes()[-1:] not in (b"", b"\n")  # a line the kill cut short: this one starts anew
    with open(journal, "a") as out:
        out.write("\n" * cut + json.dumps({"end": name, "error": line}) + "\n")
    return None
