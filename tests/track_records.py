"""Helpers of the tracking tests (test_history, test_history_gate, test_track, test_track_user): records as
`bench track` writes them, one folder per machine and commit, small git repositories, and the history command."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

from analysis.cli import main as analysis_main

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


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
