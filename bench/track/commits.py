"""`bench track --commits RANGE`: a history of the suite, each commit of the range (commit_list: A..B on the
first-parent chain, oldest first, or a comma list of revisions) measured in a temporary worktree of its
own and removed after, one record each; with --skip-measured, commits that already have a clean record
without errors on this machine (measured) are skipped. check_commits refuses a revision that git would read
as an option (--commits '--output=FILE' made `git rev-list` write FILE); git gets --end-of-options too."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from ..errors import BenchError
from ..files import read_regular
from .quickset import track_one
from .record import KIND, _git, commit_info
from .scratch import scratch_dir


def track_commits(repo: Path, args, plan: dict) -> int:
    """Every commit of ``args.commits`` in a worktree of ``repo``, one after the other: 1 when one failed."""
    say, machine = plan["say"], plan["machine"]
    commits = commit_list(repo, args.commits)
    say(f"track: {len(commits)} commits of {args.commits}, oldest first")
    _git(repo, "worktree", "prune")  # the entries of worktrees whose folders a killed command left (and sweep removed)
    status = 0
    for i, sha in enumerate(commits, 1):
        if args.skip_measured and measured(Path(args.out) / machine / sha):
            say(f"track: {i}/{len(commits)} {sha[:12]}: already measured on {machine}, skipped (--skip-measured)")
            continue
        scratch = scratch_dir("choco-track-tree-")
        tree = scratch / sha[:12]
        try:
            if _git(repo, "worktree", "add", "--detach", "--end-of-options", str(tree), sha) is None:
                print(f"track: error: {sha[:12]}: git worktree add failed", file=sys.stderr)
                status = 1
                continue
            if set(plan["parts"]) != {"user"} and not (tree / "bench" / "__init__.py").is_file():
                print(f"track: error: {sha[:12]}: no bench package at this commit", file=sys.stderr)
                status = 1
                continue
            say(f"track: {i}/{len(commits)} {sha[:12]}")
            status = max(status, track_one(tree, args, commit_info(tree), keep_as=sha[:12], **plan))
        finally:
            _git(repo, "worktree", "remove", "--force", "--end-of-options", str(tree))
            shutil.rmtree(scratch, ignore_errors=True)
    return status


def check_commits(spec: str) -> None:
    """Refuse a --commits value git could take for an option, before anything runs or is written."""
    revs = [r.strip() for r in spec.split(",")]
    sides = [side.strip() for rev in revs for side in rev.replace("...", "..").split("..")]
    if not spec.strip() or any(s.startswith("-") for s in [spec.strip(), *revs, *sides]):
        raise BenchError(f"--commits {spec!r}: a revision may not be empty or start with '-'; give a range A..B "
                         "or a comma list of revisions (e.g. main~10..main)")


def commit_list(repo: Path, spec: str) -> list[str]:
    """The commits of a range (A..B: first-parent, oldest first) or a comma list of revisions."""
    check_commits(spec)
    if ".." in spec:
        listed = _git(repo, "rev-list", "--reverse", "--first-parent", "--end-of-options", spec)
        if listed is None:
            raise BenchError(f"--commits {spec!r}: not a range of {repo} (e.g. main~10..main)")
        commits = listed.split()
    else:
        commits = []
        for rev in filter(None, (r.strip() for r in spec.split(","))):
            sha = _git(repo, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}")
            if sha is None:
                raise BenchError(f"--commits: {rev!r} is not a commit of {repo}")
            commits.append(sha)
    if not commits:
        raise BenchError(f"--commits {spec!r} holds no commits")
    return commits


def measured(folder: Path) -> bool:
    """Whether ``folder`` (a commit's on one machine) holds a record of a clean tree without errors."""
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            rec = json.loads(read_regular(path))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(rec, dict) and rec.get("kind") == KIND and rec.get("dirty") is False and not rec.get("errors"):
            return True
    return False
