"""Versioned definitions of tracked quantities: the one place that says which commit changed what a quantity
counts (REDEFINITIONS). A redefinition is no regression: its numbers start a new series, never compared with
the old one by the gate, the step finder, --compare or `bench bisect`.

The numbers of a record come from the code under test (bench track --repo), so a record's definition follows
from its commit: version 1 + the number of the quantity's redefining commits that are ancestors of it (or it),
by `git merge-base --is-ancestor` in the history's --repo. Nothing is written into the records: the old ones,
made before a redefinition was declared, get their version the same way. Where the repository cannot say (no
checkout, or it lacks a redefining commit) the version is not known, and a note says so.

    python -m analysis.history.definitions NAME GOOD BAD [--repo DIR]

prints the redefinitions of the quantity NAME between GOOD and BAD, one line each (nothing: none), for `bench
bisect`, which refuses to search across one (bench never imports analysis)."""
from __future__ import annotations

import fnmatch
import json
import subprocess
import sys

import pandas as pd

from analysis.argparsing import Parser

# quantity pattern (fnmatch, on the name before any [settings] or @machine) -> [(redefining commit, what changed)]
REDEFINITIONS: dict[str, list[tuple[str, str]]] = {
    "study.*.bits_to_target": [
        ("f2fd5e0e9a31b2dd4812612c2f8859b4b5df59ae", "bits counted per link (a copy per neighbour), issue 24")],
}


def redefinitions(name: str) -> list[tuple[str, str]]:
    """The redefining commits of the quantity ``name``, in the order declared."""
    base = name.split("[")[0].split("@")[0]
    return [r for pattern, found in REDEFINITIONS.items() if fnmatch.fnmatchcase(base, pattern) for r in found]


def _is_ancestor(repo: str | None, ancestor: str, commit: str) -> bool | None:
    """Whether ``ancestor`` is ``commit`` or an ancestor of it; None when the repository cannot say."""
    try:
        code = subprocess.run(["git", "-C", repo or ".", "merge-base", "--is-ancestor", "--end-of-options",
                               ancestor, commit], capture_output=True, timeout=60).returncode
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {0: True, 1: False}.get(code)


def version(name: str, commit: str, repo: str | None, cache: dict | None = None) -> int | None:
    """The definition ``name`` had at ``commit`` (1, the first), or None when the repository cannot tell."""
    cache = {} if cache is None else cache
    count = 1
    for redefining, _ in redefinitions(name):
        if (redefining, commit) not in cache:
            cache[(redefining, commit)] = _is_ancestor(repo, redefining, commit)
        if cache[(redefining, commit)] is None:
            return None
        count += cache[(redefining, commit)]
    return count


def label(name: str, v: int | None) -> str:
    """The words of a definition in a series' name: '2 since f2fd5e0', '1 before f2fd5e0', 'not known'."""
    found = redefinitions(name)
    if v is None:
        return "not known"
    return f"{v} since {found[v - 2][0][:7]}" if v > 1 else f"1 before {found[0][0][:7]}"


def with_definitions(table: pd.DataFrame, repo: str | None) -> tuple[pd.DataFrame, list[str]]:
    """``table`` (records.observations') with each redefined quantity's settings extended by its definition at
    the row's commit, so that settings.split_by_settings makes each definition a series of its own; and the notes
    for stderr (the definitions the repository could not tell)."""
    names = [n for n in table["name"].unique() if redefinitions(n)]
    if not names:
        return table, []
    table, cache, unknown = table.copy(), {}, set()
    for name in names:
        rows = table["name"] == name
        words = {}
        for commit in table.loc[rows, "commit"].unique():
            v = version(name, commit, repo, cache)
            words[commit] = label(name, v)
            if v is None:
                unknown.add(commit[:12])
        table.loc[rows, "settings"] = [json.dumps([*json.loads(s), ["definition", words[c]]])
                                       for s, c in zip(table.loc[rows, "settings"], table.loc[rows, "commit"])]
    split = [n for n in names if table.loc[table["name"] == n, "settings"].nunique() > 1]
    commit, what = redefinitions(names[0])[0]
    notes = [f"analysis history: note: {len(split)} quantities were redefined within the history (e.g. {split[0]}: "
             f"{redefinitions(split[0])[-1][1]} since {redefinitions(split[0])[-1][0][:7]}): each definition is a "
             "series of its own, never compared with another"] if split else []
    if unknown:
        notes.append(f"analysis history: note: {repo or '.'} cannot tell which definition {len(unknown)} commits had "
                     f"of {len(names)} redefined quantities (e.g. {names[0]}: {what} at {commit[:7]}; it is no "
                     "checkout holding both): they are the group 'definition not known'")
    return table, notes


def between(name: str, good: str, bad: str, repo: str | None) -> list[str]:
    """The redefinitions of ``name`` that BAD has and GOOD has not (or either cannot be told), one line each."""
    return [f"{commit[:12]}: {what}" for commit, what in redefinitions(name)
            if not (_is_ancestor(repo, commit, bad) is False or _is_ancestor(repo, commit, good) is True)]


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m analysis.history.definitions", description=__doc__.split("\n\n")[0])
    p.add_argument("name")
    p.add_argument("good")
    p.add_argument("bad")
    p.add_argument("--repo", default=None)
    args = p.parse_args(argv)
    print("\n".join(between(args.name, args.good, args.bad, args.repo)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
