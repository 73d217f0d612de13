"""What keeps `python -m analysis history` from passing on nothing (docs/tracking.md, "The gate").

Refusals, exit 2 and one line, before anything is written (the check could not be made): an empty --expect
or one that starts with '-' (check_expect_value), --expect naming a commit that is not the newest read or has
no usable values left (expect_refusal), and, with --expect, a newest commit none of whose quantities has an
earlier commit of the same settings to be compared with (nothing_compared).

Failures, exit 1 with one line each (the newest commit was measured and is not fine: newest_failures): a
record of it with failed parts (errors), a seed of a study cell that failed or has no value, a figure the
commit before (the last one measured on the same machines) had and the newest lacks although its part ran,
and a record of it (or of a later commit) left out as unusable (NaN, no values, a broken field). The newest
commit is that of every record read, values or not: one whose every run failed has none, and had been
skipped for the commit before it, exit 0 (failed_newest keeps it, and "every run failed" heads its lines).

Records of commits the repository does not hold are no baseline (order.py leaves them out; not_compared
names them in the verdict line)."""
from __future__ import annotations

import re
import subprocess

import pandas as pd

from analysis.errors import UsageError
from analysis.history.order import graph_positions
from analysis.history.records import STUDY_FIELDS, Skipped, point_key


def check_expect_value(rev: str | None) -> None:
    if rev is not None and (not rev.strip() or rev.strip().startswith("-")):
        raise UsageError(f"--expect {rev!r}: empty or an option; give a commit of --repo, e.g. HEAD")


def commit_of(rev: str, repo: str | None, flag: str = "--expect") -> str:
    """The full hash of ``rev``: as given when it is one, else `git rev-parse` in ``repo``."""
    if re.fullmatch(r"[0-9a-f]{40}", rev):
        return rev
    try:
        proc = subprocess.run(["git", "-C", repo or ".", "rev-parse", "--verify", "--quiet", "--end-of-options",
                               f"{rev}^{{commit}}"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UsageError(f"{flag} {rev}: git cannot run ({err})") from None
    if proc.returncode != 0:
        raise UsageError(f"{flag} {rev}: not a commit of {repo or '.'}")
    return proc.stdout.strip()


def expect_refusal(rev: str, expected: str, points: list[str], commit_of_point: dict[str, str], records: list[dict],
                   skipped: list[Skipped], where: str, clean_only: bool) -> str | None:
    """Why --expect REV (``expected``, its full hash) refuses the comparison, or None."""
    newest = points[-1]
    if commit_of_point[newest] == expected and not newest.endswith("+dirty"):
        return None
    if expected[:12] in points:
        why = f"{expected[:12]} is not the newest commit read"
    elif any(r["commit"] == expected for r in records):
        why = f"the records of {expected[:12]} have no values left after --max-busy/--max-load (busy machine), --kinds and --only"
    else:
        broken = [s for s in skipped if s.commit == expected and not (clean_only and s.dirty)]
        why = (f"the {len(broken)} records of {expected[:12]} are unusable ({broken[0].path}: {broken[0].reason})"
               if broken else f"no{' clean' if clean_only else ''} record of {expected[:12]} in {where}")
    return f"--expect {rev}: {why} (newest read: {newest})"


def nothing_compared(rev: str, newest: pd.DataFrame) -> str | None:
    """With --expect: why the newest commit was compared with nothing, or None."""
    measured = newest[newest["verdict"] != "not measured"]
    if len(measured) and (measured["verdict"] == "first commit").all():
        return (f"--expect {rev}: none of the newest commit's {len(measured)} quantities has an earlier commit of "
                "the same settings to compare with (see history.csv after a run without --expect)")
    return None


def _failed(rec: dict) -> bool:
    """Whether a record says that something of it failed: an error line, a failed or valueless study seed."""
    cells = ((rec.get("study") or {}).get("cells") or {}).values()
    return bool(rec.get("errors")) or any("failed" in (e.get("status") or []) or any(
        v is None for f in STUDY_FIELDS for v in (e.get(f) or [])) for e in cells)


def failed_newest(ordered: list[str], records: list[dict], valued: set[str]) -> str | None:
    """The newest point of every record read (``ordered``) when it has no values left (``valued``: the points
    that have) and its records say that runs failed: it is the newest commit, and it failed."""
    newest = ordered[-1] if ordered else None
    if newest is None or newest in valued:
        return None
    return newest if any(_failed(r) for r in records if point_key(r) == newest) else None


def not_compared(foreign: list[str], records: list[dict]) -> str:
    """For the verdict line: the commits the repository does not hold, left out of the comparison."""
    if not foreign:
        return ""
    count = sum(point_key(r) in set(foreign) for r in records)
    return f"; not compared: {len(foreign)} commits not in the repository ({count} records, e.g. {foreign[0]})"


def _groups(rec: dict) -> set[str] | None:
    """The bench perf groups a record ran (None: all of them)."""
    match = re.search(r"--only\s+(\S+)", str((rec.get("perf") or {}).get("command") or ""))
    return set(match.group(1).split(",")) if match else None


def _covers(rec: dict, name: str) -> bool:
    """Whether the record ran the part that measures the quantity ``name`` (its bench perf group; its cell)."""
    base, _, machine = name.partition("@")
    if machine and rec["machine"]["id"] != machine:
        return False
    if base.startswith("study."):
        return base[len("study."):].rsplit(".", 1)[0] in ((rec.get("study") or {}).get("cells") or {})
    if base.startswith("user."):  # the user's benchmark file of that stem ran
        files = (rec.get("user") or {}).get("files") or []
        return base.split(".")[1] in {str(f).rsplit(".", 1)[0] for f in files}
    groups = _groups(rec)
    return isinstance((rec.get("perf") or {}).get("figures"), dict) and (groups is None or base.split(".")[1] in groups)


def later_than(newest: str, newest_date, repo: str | None, graph: bool):
    """is_later(skipped) for newest_failures: the unusable record is of the commit ``newest`` or of a
    descendant of it, by the repository's graph when ``graph`` and it holds ``newest`` (a commit it does not
    hold is not placed), else by committer date."""
    in_repo = graph and newest in graph_positions(repo, [newest])[0]
    descendant: dict[str, bool] = {}

    def is_later(s: Skipped) -> bool:
        if s.commit is None or s.commit == newest:
            return s.commit == newest
        if not in_repo:
            return s.date is not None and newest_date is not None and s.date > newest_date
        if s.commit not in descendant:
            try:
                descendant[s.commit] = subprocess.run(
                    ["git", "-C", repo or ".", "merge-base", "--is-ancestor", "--end-of-options", newest, s.commit],
                    capture_output=True, timeout=60).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                descendant[s.commit] = False
        return descendant[s.commit]
    return is_later


def newest_failures(points: list[str], records: list[dict], skipped: list[Skipped], table: pd.DataFrame,
                    selected, is_later, clean_only: bool) -> list[str]:
    """One line per way the newest commit (``points[-1]``) failed. ``table``: the values left after --kinds and
    --only, before the busy records go; ``selected(quantity, kind)``: whether --kinds and --only keep a quantity;
    ``is_later(skipped)``: whether an unusable record is of the newest commit or a later one."""
    newest = points[-1]
    mine = [r for r in records if point_key(r) == newest]
    lines = [] if newest in set(table["point"]) else [  # failed_newest's: no value of any run
        f"every run failed: its {len(mine)} records hold no value of the quantities selected"]
    flagged: set[str] = set()  # cells with a failed seed: their missing values are said once
    for rec in mine:
        errors = rec.get("errors") or []
        if errors:
            lines.append(f"{rec['_path']}: {len(errors)} failed parts or runs, e.g. {str(errors[0])[:200]}")
        for cell, entry in ((rec.get("study") or {}).get("cells") or {}).items():
            status = entry.get("status") or []
            fields = [f for f, (kind, _, _) in STUDY_FIELDS.items() if selected(f"study.{cell}.{f}", kind)]
            bad = [str(seed) for i, seed in enumerate(entry["seeds"])  # a field not recorded at all: below
                   if fields and ((i < len(status) and status[i] == "failed")
                                  or any(entry.get(f) and entry[f][i] is None for f in fields))]
            if bad:
                flagged.add(f"study.{cell}.")
                lines.append(f"study.{cell}: seed{'s' * (len(bad) > 1)} {', '.join(bad)} failed or "
                             f"{'have' if len(bad) > 1 else 'has'} no value ({rec['_path']})")
    # figures of the last earlier commit measured on the same machines (a CPU does not run the CUDA group)
    same = table[table["machine"].isin({rec["machine"]["id"] for rec in mine})]
    earlier = [p for p in points[:-1] if p in set(same["point"])]
    if earlier:
        before = set(same.loc[same["point"] == earlier[-1], "name"])
        now = set(same.loc[same["point"] == newest, "name"])
        for name in sorted(before - now):
            if any(_covers(rec, name) for rec in mine) and not any(name.startswith(c) for c in flagged):
                lines.append(f"{name}: measured at the commit before ({earlier[-1]}), missing at the newest although "
                             "its part ran")
    for s in skipped:
        if not (clean_only and s.dirty) and is_later(s):
            lines.append(f"{s.path}: a record of the newest commit (or a later one) is unusable: {s.reason}")
    return lines
