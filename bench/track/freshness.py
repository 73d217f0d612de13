"""Is the committed history current? `make track-check` asks first, `make track-refresh` before it records.

    python -m bench.track.freshness --max-behind N [--repo DIR] [--history results/history]
    python -m bench.track.freshness --clean [--repo DIR]

The first refuses (one line, exit 1) a committed history whose newest record is of a commit more than N
first-parent commits behind HEAD: a record made now would be compared across every change since (the issue's
231 commits, three redefined quantities read as regressions). Only committed records count (`git ls-files`):
the record bench track has just written of HEAD is no proof that the history was kept. The second refuses
(exit 2) a tree that is not its commit, whose record would be dirty and of no use to the committed history."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .record import ROOT, _git, tree_changes

REFRESH = "make track-refresh"  # records HEAD into results/history; then commit it


def behind(repo: Path, history: str) -> tuple[int | None, str | None]:
    """(first-parent commits from the newest committed record's commit to HEAD, that commit), or (None, None)
    when no committed record is of a commit on HEAD's first-parent chain."""
    listed = _git(repo, "ls-files", "-z", "--end-of-options", history, strip=False)
    chain = _git(repo, "rev-list", "--first-parent", "HEAD")
    if listed is None or chain is None:
        raise SystemExit(f"track-check: error: {repo} is not a git checkout with a commit")
    recorded = {part for path in listed.split("\0") for part in Path(path).parts if re.fullmatch(r"[0-9a-f]{40}", part)}
    for distance, commit in enumerate(chain.split()):
        if commit in recorded:
            return distance, commit
    return None, None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.track.freshness", description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=Path, default=ROOT)
    p.add_argument("--history", default="results/history", help="the committed history, relative to --repo")
    p.add_argument("--max-behind", type=int, default=None, metavar="N")
    p.add_argument("--clean", action="store_true", help="refuse a tree that is not its commit")
    args = p.parse_args(argv)
    if args.clean and (changed := tree_changes(args.repo)):
        print(f"track-refresh: error: the tree is not its commit ({', '.join(changed[:3])}): its record would be "
              "dirty; commit or stash first", file=sys.stderr)
        return 2
    if args.max_behind is None:
        return 0
    distance, commit = behind(args.repo, args.history)
    if distance is None or distance > args.max_behind:
        where = (f"{distance} first-parent commits behind HEAD (newest record: {commit[:12]})" if commit else
                 "without a record of any commit of HEAD's first-parent history")
        print(f"track-check: the committed history {args.history} is {where}, more than TRACK_MAX_BEHIND="
              f"{args.max_behind}: run `{REFRESH}` and commit {args.history}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
