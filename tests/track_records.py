"""Helpers of the tracking tests (test_history, test_history_gate, test_track, test_track_user): records as
`bench track` writes them, one folder per machine and commit, small git repositories, and the history command."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from analysis.cli import main as analysis_main

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
MACHINE = "cpu-2c-test"
CELL = "choco-sign_ring8"  # the tracking study's cell
ACC = f"study.{CELL}.final_test_acc"


def sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


def record(commit: int | str, date: datetime | None = None, *, perf: dict | None = None, study: dict | None = None,
           kinds: dict | None = None, higher: bool = False, machine: str = MACHINE, dirty: bool = False,
           started: int = 0, errors=(), **perf_extra) -> dict:
    """A record as bench track writes it, of commit i (sha(i), committed i hours after START) or of a hash
    committed at ``date``: perf figures name -> values (ratios, lower is better, unless ``kinds`` or ``higher``
    say otherwise; ``perf_extra`` beside them), study cells name -> field -> per-seed values."""
    describe = commit[:7] if isinstance(commit, str) else f"c{commit:02d}"
    if isinstance(commit, int):
        commit, date = sha(commit), date or START + timedelta(hours=commit)
    rec = {"kind": "choco-track", "version": 1, "commit": commit, "describe": describe, "subject": "s",
           "commit_date": date.isoformat(), "dirty": dirty, "errors": list(errors),
           "started": (START + timedelta(days=30, minutes=started)).isoformat(),
           "machine": {"id": machine, "cores": 2, "device": "cpu"}}
    if perf is not None:
        rec["perf"] = {"command": "bench perf --quick", "sizes": {"round_d": 10000, "repeats": 2}, **perf_extra,
                       "figures": {name: {"values": list(values), "unit": "x", "higher_is_better": higher,
                                          "kind": (kinds or {}).get(name, "ratio")} for name, values in perf.items()}}
    if study is not None:
        rec["study"] = {"cells": {cell: {"seeds": list(range(len(next(iter(fields.values()))))), **fields}
                                  for cell, fields in study.items()}}
    rec["parts"] = [part for part in ("perf", "study") if part in rec]
    return rec


def tracked(commit: int | str, date: datetime | None = None, acc=(0.60, 0.61, 0.59), epochs=(4.0, 4.5, 5.0),
                 target=0.5, status=("completed",) * 3, **kw) -> dict:
    """A record of the tracking study's one cell (3 seeds: accuracy, epochs, bits and time to ``target``) with the
    study's settings (``kw``: record's)."""
    rec = record(commit, date, study={CELL: {
        "status": list(status), "final_test_acc": list(acc), "epochs_to_target": list(epochs),
        "bits_to_target": [None if e is None else e * 1e6 for e in epochs],
        "time_to_target_s": [None if e is None else e * 2 for e in epochs]}}, **kw)
    rec["study"].update(name="track", config_digest="16e1a9797ff1", target_acc=target, seeds=[0, 1, 2])
    return rec


def accuracy_history(root: Path, n: int, newest_drop: float = 0.0):
    """n commits of the tracked cell, 3 noisy seeds at 60 %, less ``newest_drop`` at the newest commit."""
    rng = np.random.default_rng(0)
    for i in range(n):
        level = 0.60 - (newest_drop if i == n - 1 else 0.0)
        write(root, tracked(i, acc=np.round(level + rng.normal(0, 0.005, 3), 4).tolist()))


def flat_history(root: Path, n: int = 5, perf: bool = True) -> None:
    """n commits, one an hour, of the same code: identical study numbers, perf ratios about 1."""
    for i in range(n):
        write(root, tracked(i, perf={"b.round_vs_copy_sign": [1.0, 1.02], "c.overhead": [2.0, 2.04]} if perf
                                 else None))


def write(root: Path, rec: dict, name: str = "20260101T000000Z") -> Path:
    """``rec`` under root/<machine>/<commit>/<name>.json, beside (never over) the records already there."""
    folder = root / rec["machine"]["id"] / rec["commit"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    while path.exists():
        path = folder / f"{path.stem}-x.json"
    path.write_text(json.dumps(rec))  # json writes NaN as NaN, as bench track would
    return path


def history(root: Path, *args) -> int:
    """`analysis history ROOT ARGS...` in this process; its exit status."""
    return analysis_main(["history", str(root), *map(str, args)])


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True, env={**os.environ, **(env or {})}).stdout.strip()


def git_repo(repo: Path, n: int, dates: list[datetime] | None = None, change=None) -> list[str]:
    """A repository at ``repo`` of n commits (committed at ``dates`` where given; ``change(i)`` edits the tree
    before commit i, else the commits are empty); their hashes, oldest first."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commits = []
    for i in range(n):
        when = dates[i].isoformat() if dates else None
        env = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when} if when else None
        if change:
            change(i)
            git(repo, "add", ".")
        git(repo, "commit", "-q", *([] if change else ["--allow-empty"]), "-m", f"commit {i}", env=env)
        commits.append(git(repo, "rev-parse", "HEAD"))
    return commits


def one_line(capsys) -> str:
    """The one line a refusal writes on stderr."""
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err



def make_checkout(repo: Path) -> Path:
    """A git checkout at ``repo`` of one commit holding a bench package and other files bench track counts as
    code (what it measures is faked in the tests that use it)."""
    def files(i):
        for path in ("bench/__init__.py", "bench/track/quickset.py", "analysis/summary.py", "Makefile"):
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text("x = 1\n")
    git_repo(repo, 1, change=files)
    return repo
