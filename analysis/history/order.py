"""Commit order of `python -m analysis history`: the points (commits, and dirty trees after their commit) in the
order of the repository's graph (graph_positions: `git rev-list --topo-order` of the measured commits, so an
ancestor always comes before its descendants whatever the clocks say; commits it does not hold come first,
so that none of them can be the newest, and are said apart: the gate never compares the newest commit with
them, since copies of a regressed record relabelled with unknown hashes had made its regression "within
noise"), or of the first-parent chain of HEAD
(--order git), or of committer dates (--order date, and the fallback, said on stderr, when no repository
holding the commits is at hand)."""
from __future__ import annotations

import subprocess

import pandas as pd

from analysis.errors import UsageError
from analysis.history.records import _NOTES, _parse_date

ORDERS = ("graph", "git", "date")


def _git(repo: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", repo, *args], input=stdin, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None


def graph_positions(repo: str | None, commits) -> tuple[dict[str, int], str]:
    """Each of ``commits`` (40-digit hashes) that ``repo`` holds -> its place in a topological order of the
    repository (ancestors first); and, when none could be placed, why."""
    repo, commits = repo or ".", sorted(set(commits))
    known_check = _git(repo, "cat-file", "--batch-check", stdin="".join(f"{c}\n" for c in commits))
    if known_check is None or known_check.returncode != 0:
        return {}, f"{repo} is not a git checkout (or git cannot run)"
    known = [line.split()[0] for line in known_check.stdout.splitlines() if line.split()[1:2] == ["commit"]]
    if not known:
        return {}, f"the repository at {repo} holds none of the {len(commits)} measured commits"
    listed = _git(repo, "rev-list", "--topo-order", "--reverse", "--stdin", stdin="".join(f"{c}\n" for c in known))
    if listed is None or listed.returncode != 0:
        return {}, f"git rev-list failed in {repo}"
    place = {c: i for i, c in enumerate(listed.stdout.split())}
    return {c: place[c] for c in known if c in place}, ""


def order_points(table: pd.DataFrame, order: str, repo: str | None) -> tuple[list[str], list[str]]:
    """The points of ``table`` (one row per record or value) in commit order (see the module's docstring), and
    those of commits the repository does not hold. By the graph, those come first (by date, with a note); by
    the first-parent chain they are left out (with a note). Refused: two commits that share a point's 12 digits."""
    shared = table.groupby("point")["commit"].nunique()
    if (shared > 1).any():
        point = shared[shared > 1].index[0]
        raise UsageError(f"records of {shared[point]} different commits share the point {point} (their first 12 "
                         "digits): a record names a commit that is not the one measured")
    first = table.sort_values("started").groupby("point", sort=False).first()
    by_date = sorted(first.index, key=lambda p: (_parse_date(first.loc[p, "commit_date"]), first.loc[p, "generation"],
                                                 bool(first.loc[p, "dirty"]), first.loc[p, "started"]))
    if order == "date":
        return by_date, []
    if order == "graph":
        position, why = graph_positions(repo, first["commit"])
        if not position:
            _NOTES.append(f"analysis history: note: {why}: commits are in committer-date order, which one skewed "
                          "clock can reorder (give --repo CHECKOUT, or --order date to choose it)")
            return by_date, []
        unknown = [p for p in by_date if first.loc[p, "commit"] not in position]
        if unknown:  # e.g. commits of a branch since rebased: never the newest, nor between known ones
            _NOTES.append(f"analysis history: note: {len(unknown)} commits are not in the repository at {repo or '.'}: "
                          f"they are left out of the history, only --compare reads them (e.g. {unknown[0]})")
        known = [p for p in by_date if p not in unknown]
        return unknown + sorted(known, key=lambda p: (position[first.loc[p, "commit"]],
                                                      bool(first.loc[p, "dirty"]))), unknown
    else:
        proc = _git(repo or ".", "rev-list", "--first-parent", "HEAD")
        if proc is None:
            raise UsageError("--order git: git cannot run")
        if proc.returncode != 0:
            raise UsageError(f"--order git: {repo or '.'} is not a git checkout ({proc.stderr.strip()[:200]})")
        position = {c: i for i, c in enumerate(reversed(proc.stdout.split()))}
    missing = [p for p in by_date if first.loc[p, "commit"] not in position]
    if missing:
        _NOTES.append(f"analysis history: note: {len(missing)} commits are not on the first-parent history of "
                      f"{repo or '.'} and are left out, e.g. {missing[0]}")
    kept = [p for p in by_date if p not in missing]
    return sorted(kept, key=lambda p: (position[first.loc[p, "commit"]], bool(first.loc[p, "dirty"]))), []
