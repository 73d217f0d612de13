"""Reading the records of `bench track` for `python -m analysis history` (and `analysis bisect`): what a
usable record is (record_problem), loading every record under the history folders (load_records), the
tracked values as one tidy table (observations: one row per repeat or seed of each quantity, with the
machine-bound quantities split per machine), the commits in order (order_points: committer date or the
first-parent chain of a checkout) and the values of each quantity by commit (series_of). It also holds the
kinds of quantity with their default tolerances and the notes collected for stderr (_NOTES)."""
from __future__ import annotations

import json
import math
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from analysis.cli import UsageError

KIND = "choco-track"
# Tolerances of the change that counts, per kind of quantity: ("rel", f) is a relative change of the
# median (f = 0.2: 20 % worse), ("abs", d) an absolute one (d = 0.02: two accuracy points). docs/tracking.md
# says why these values.
TOLERANCES = {
    "absolute": ("rel", 0.20),   # times, throughputs, memory: one machine only
    "ratio": ("rel", 0.15),      # round vs copy, simulated vs per-process, vectorised vs loop: any machine
    "accuracy": ("abs", 0.02),   # a cell's final test accuracy (per seed)
    "to_target": ("rel", 0.25),  # epochs, bits and modelled seconds to the target accuracy (per seed)
    "agreement": ("abs", 0.01),  # differences between paths that must agree (perf g.*_difference)
}
KINDS = tuple(TOLERANCES)
MACHINE_BOUND = {"absolute"}
STUDY_FIELDS = {  # record field -> (kind, higher is better, unit)
    "final_test_acc": ("accuracy", True, "test accuracy"),
    "epochs_to_target": ("to_target", False, "epochs"),
    "bits_to_target": ("to_target", False, "bits sent per worker"),
    "time_to_target_s": ("to_target", False, "modelled s"),
}
_NOTES: list[str] = []


# -- reading records --------------------------------------------------------------------------------------
def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _parse_date(text) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def record_problem(rec) -> str | None:
    """Why a parsed JSON is not a usable tracking record, or None."""
    if not isinstance(rec, dict) or rec.get("kind") != KIND:
        return f"not a bench track record (kind {rec.get('kind') if isinstance(rec, dict) else None!r})"
    if not isinstance(rec.get("commit"), str) or not re.fullmatch(r"[0-9a-f]{40}", rec["commit"]):
        return f"commit is {rec.get('commit')!r:.50}, not a 40-digit hash"
    if _parse_date(rec.get("commit_date")) is None:
        return f"commit_date is {rec.get('commit_date')!r:.50}, not an ISO date"
    machine = rec.get("machine")
    if not isinstance(machine, dict) or not isinstance(machine.get("id"), str) or not machine["id"]:
        return "machine has no id"
    perf = rec.get("perf")
    if perf is not None:
        figures = perf.get("figures") if isinstance(perf, dict) else None
        if perf and figures is not None and not isinstance(figures, dict):
            return "perf.figures is not an object"
        for name, fig in (figures or {}).items():
            if not isinstance(fig, dict):
                return f"perf figure {name!r} is not an object"
            values = fig.get("values", [fig.get("median")])
            if not isinstance(values, list) or not all(_is_number(v) for v in values):
                return f"perf figure {name!r}: values are not a list of numbers"
            if not isinstance(fig.get("higher_is_better", True), bool):
                return f"perf figure {name!r}: higher_is_better is not true or false"
    study = rec.get("study")
    if study is not None:
        cells = study.get("cells") if isinstance(study, dict) else None
        if not isinstance(cells, dict):
            return "study.cells is not an object"
        for cell, entry in cells.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("seeds"), list):
                return f"study cell {cell!r} has no list of seeds"
            for field in STUDY_FIELDS:
                values = entry.get(field, [])
                if not isinstance(values, list) or (values and len(values) != len(entry["seeds"])):
                    return f"study cell {cell!r}: {field} is not one value per seed"
                if any(not (v is None or v == "inf" or _is_number(v)) for v in values):
                    return f"study cell {cell!r}: {field} holds a value that is not a number"
    return None


def load_records(dirs: list[Path]) -> tuple[list[dict], list[tuple[str, str]]]:
    """Every record under ``dirs`` (a machine's folder or a root of several), each with its "_path"; and
    (path, reason) of the JSON files left out."""
    records, problems = [], []
    for base in dirs:
        for path in sorted(base.rglob("*.json")):
            if path.name.startswith(".") or path.name == "machine.json" or any(
                    part.endswith(".report") for part in path.relative_to(base).parts[:-1]):
                continue
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError) as err:
                problems.append((str(path), f"not readable JSON ({err})"))
                continue
            why = record_problem(rec)
            if why:
                problems.append((str(path), why))
                continue
            rec["_path"] = str(path)
            records.append(rec)
    return records, problems


def _perf_kind(fig: dict) -> str:
    if fig.get("kind") == "ratio":
        return "ratio"
    return "agreement" if "difference" in str(fig.get("unit", "")) else "absolute"


def _load(rec: dict) -> float:
    """The 1-minute load average per core when the record's `bench perf` started (NaN when unknown):
    other jobs on the machine skew every timing, the per-worker loops most."""
    try:
        return float(rec["perf"]["load_average_1m"]["start"]) / float(rec["machine"]["cores"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return math.nan


def point_key(rec: dict) -> str:
    """A point of the series: a commit, or a commit's dirty tree (measured, but not that commit)."""
    return rec["commit"][:12] + ("+dirty" if rec.get("dirty") else "")


def observations(records: list[dict]) -> pd.DataFrame:
    """One row per tracked value: quantity, kind, unit, direction, machine, point (commit), sample, value."""
    rows = []
    for rec in records:
        base = {"machine": rec["machine"]["id"], "point": point_key(rec), "commit": rec["commit"], "load": _load(rec),
                "dirty": bool(rec.get("dirty")), "describe": str(rec.get("describe") or rec["commit"][:7]),
                "subject": str(rec.get("subject") or ""), "commit_date": rec["commit_date"],
                "generation": rec["generation"] if _is_number(rec.get("generation")) else -1,
                "started": str(rec.get("started") or ""), "record": rec["_path"]}
        for name, fig in ((rec.get("perf") or {}).get("figures") or {}).items():
            kind = _perf_kind(fig)
            values = fig.get("values") or [fig.get("median")]
            for j, value in enumerate(values):
                rows.append({**base, "quantity": f"perf.{name}", "kind": kind, "unit": str(fig.get("unit", "")),
                             "higher_is_better": bool(fig.get("higher_is_better", True)),
                             "bound": fig.get("target") if kind == "agreement" else None,
                             "sample": f"repeat {j}", "value": float(value)})
        for cell, entry in ((rec.get("study") or {}).get("cells") or {}).items():
            for field, (kind, higher, unit) in STUDY_FIELDS.items():
                for seed, value in zip(entry["seeds"], entry.get(field) or []):
                    if value is None:
                        continue
                    rows.append({**base, "quantity": f"study.{cell}.{field}", "kind": kind, "unit": unit,
                                 "higher_is_better": higher, "bound": None, "sample": f"seed {seed}",
                                 "value": math.inf if value == "inf" else float(value)})
    table = pd.DataFrame(rows, columns=["quantity", "kind", "unit", "higher_is_better", "bound", "machine", "load",
                                        "point", "commit", "dirty", "describe", "subject", "commit_date",
                                        "generation", "started",
                                        "record", "sample", "value"])
    bound = table["kind"].isin(MACHINE_BOUND)
    if table.loc[bound, "machine"].nunique() > 1:  # absolute times: one series per machine
        table.loc[bound, "quantity"] = table.loc[bound, "quantity"] + "@" + table.loc[bound, "machine"]
    return table


def order_points(table: pd.DataFrame, order: str, repo: str | None) -> list[str]:
    """The points in commit order: by committer date, commits of the same second by their place on the
    first-parent chain (a dirty tree after its commit); or by `git rev-list --first-parent HEAD` of ``repo``
    (points of commits not on it are left out, with a note)."""
    first = table.sort_values("started").groupby("point", sort=False).first()
    keyed = sorted(first.index, key=lambda p: (_parse_date(first.loc[p, "commit_date"]), first.loc[p, "generation"],
                                               bool(first.loc[p, "dirty"]), first.loc[p, "started"]))
    if order == "date":
        return keyed
    try:
        proc = subprocess.run(["git", "-C", repo or ".", "rev-list", "--first-parent", "HEAD"], capture_output=True,
                              text=True, timeout=60)
    except OSError as err:
        raise UsageError(f"--order git: git cannot run ({err})") from None
    if proc.returncode != 0:
        raise UsageError(f"--order git: {repo or '.'} is not a git checkout ({proc.stderr.strip()[:200]})")
    position = {c: i for i, c in enumerate(reversed(proc.stdout.split()))}
    missing = [p for p in keyed if first.loc[p, "commit"] not in position]
    if missing:
        _NOTES.append(f"analysis history: note: {len(missing)} commits are not on the first-parent history of "
                      f"{repo or '.'} and are left out, e.g. {missing[0]}")
    kept = [p for p in keyed if p not in missing]
    return sorted(kept, key=lambda p: (position[first.loc[p, "commit"]], bool(first.loc[p, "dirty"])))



def series_of(table: pd.DataFrame, points: list[str]) -> dict[str, dict]:
    """quantity -> {meta, points (in order, those measured), values (one array per point), records}."""
    out = {}
    rank = {p: i for i, p in enumerate(points)}
    table = table[table["point"].isin(rank)]
    for quantity, g in table.groupby("quantity", sort=True):
        first = g.iloc[0]
        study = first["kind"] in ("accuracy", "to_target")
        pts = sorted(g["point"].unique(), key=rank.get)
        values = []
        for p in pts:
            rows = g[g["point"] == p]
            if study:  # re-runs of a deterministic study: one value per seed
                values.append(rows.groupby("sample")["value"].median().to_numpy(float))
            else:
                values.append(rows["value"].to_numpy(float))
        out[quantity] = {"kind": first["kind"], "unit": first["unit"],
                         "higher_is_better": bool(first["higher_is_better"]),
                         "bound": first["bound"], "points": pts, "values": values,
                         "machines": sorted(g["machine"].unique()),
                         "records": {p: g[g["point"] == p].groupby("record")["value"].median().to_numpy(float)
                                     for p in pts}}
    return out
