"""Reading the records of `bench track` for `python -m analysis history` (and `analysis bisect`): what a
usable record is (record_problem: every field the reader uses has its type, every value is a number), loading
every record under the history folders (load_records: the unusable ones come back as Skipped, with the
reason), the tracked values as one tidy table (observations: one row per repeat or seed of each quantity,
with the machine-bound quantities split per machine and the settings each was measured with) and the values
of each quantity by commit (series_of). It also holds the kinds of quantity with their default tolerances
and the notes collected for stderr (_NOTES). Commit order is order.py's, settings groups settings.py's."""
from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from analysis.files import read_regular

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
USER_KINDS = ("absolute", "ratio", "accuracy", "to_target")  # what a user's benchmark may declare (benchfile.py)
MACHINE_BOUND = {"absolute"}
TIMED_KINDS = {"absolute", "ratio"}  # perf figures timed on the machine (agreement figures are differences)
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


def _number(v) -> bool:
    """A JSON number a float can hold (not NaN; a huge integer overflows float())."""
    if not _is_number(v):
        return False
    try:
        return not math.isnan(float(v))
    except OverflowError:
        return False


def _figure_problem(name: str, fig, part: str = "perf") -> str | None:
    if not isinstance(fig, dict):
        return f"{part} figure {name!r} is not an object"
    values = fig.get("values", [fig.get("median")])
    if not isinstance(values, list) or not values:
        return f"{part} figure {name!r} has no values"
    bad = [v for v in values if not (_number(v) and math.isfinite(float(v)))]
    if bad:
        return f"{part} figure {name!r}: value {bad[0]!r:.30} is not a finite number"
    if not isinstance(fig.get("higher_is_better", True), bool):
        return f"{part} figure {name!r}: higher_is_better is not true or false"
    if part == "user" and fig.get("kind", "absolute") not in USER_KINDS:
        return f"user figure {name!r}: kind {fig.get('kind')!r:.30} is not one of {', '.join(USER_KINDS)}"
    return None


def _cell_problem(cell: str, entry) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("seeds"), list):
        return f"study cell {cell!r} has no list of seeds"
    for field in (*STUDY_FIELDS, "status"):
        values = entry.get(field, [])
        if not isinstance(values, list) or (values and len(values) != len(entry["seeds"])):
            return f"study cell {cell!r}: {field} is not one value per seed"
        if field != "status" and any(not (v is None or v == "inf" or _number(v)) for v in values):
            return f"study cell {cell!r}: {field} holds a value that is not a number (or NaN)"
    return None


def record_problem(rec) -> str | None:
    """Why a parsed JSON is not a usable tracking record, or None."""
    if not isinstance(rec, dict) or rec.get("kind") != KIND:
        return f"not a bench track record (kind {rec.get('kind') if isinstance(rec, dict) else None!r:.50})"
    if not isinstance(rec.get("commit"), str) or not re.fullmatch(r"[0-9a-f]{40}", rec["commit"]):
        return f"commit is {rec.get('commit')!r:.50}, not a 40-digit hash"
    if _parse_date(rec.get("commit_date")) is None:
        return f"commit_date is {rec.get('commit_date')!r:.50}, not an ISO date"
    machine = rec.get("machine")
    if not isinstance(machine, dict) or not isinstance(machine.get("id"), str) or not machine["id"]:
        return "machine has no id"
    if not isinstance(rec.get("errors", []), list):
        return f"errors is {type(rec['errors']).__name__}, not a list"
    for part in ("perf", "user"):
        section = rec.get(part)
        if section is None:
            continue
        if not isinstance(section, dict):
            return f"{part} is {type(section).__name__}, not an object"
        figures = section.get("figures")
        if figures is not None and not isinstance(figures, dict):
            return f"{part}.figures is {type(figures).__name__}, not an object"
        for name, fig in (figures or {}).items():
            why = _figure_problem(name, fig, part)
            if why:
                return why
    study = rec.get("study")
    if study is not None:
        cells = study.get("cells") if isinstance(study, dict) else None
        if not isinstance(cells, dict):
            return "study.cells is not an object"
        for cell, entry in cells.items():
            why = _cell_problem(cell, entry)
            if why:
                return why
    return None


class Skipped(NamedTuple):
    """A JSON file under the history that is not a usable record: where, why, and (when the folder or the
    record names one) its commit, its committer date and whether it says it is dirty."""
    path: str
    reason: str
    commit: str | None = None
    date: datetime | None = None
    dirty: bool = False


def _skipped(path: Path, reason: str, rec) -> Skipped:
    named = rec.get("commit") if isinstance(rec, dict) else None
    folder = path.parent.name
    commit = folder if re.fullmatch(r"[0-9a-f]{40}", folder) else (
        named if isinstance(named, str) and re.fullmatch(r"[0-9a-f]{40}", named) else None)
    date = _parse_date(rec.get("commit_date")) if isinstance(rec, dict) else None
    return Skipped(str(path), reason, commit, date, isinstance(rec, dict) and rec.get("dirty") is True)


def load_records(dirs: list[Path]) -> tuple[list[dict], list[Skipped]]:
    """Every record under ``dirs`` (a machine's folder or a root of several), each with its "_path"; and the
    JSON files left out (Skipped: path, reason, ...). A record must sit in its commit's folder."""
    records, problems = [], []
    for base in dirs:
        for path in sorted(base.rglob("*.json")):
            if path.name.startswith(".") or path.name == "machine.json" or any(
                    part.endswith(".report") for part in path.relative_to(base).parts[:-1]):
                continue
            try:
                rec = json.loads(read_regular(path))
            except (OSError, ValueError, RecursionError) as err:
                problems.append(_skipped(path, f"not readable JSON ({str(err)[:100]})", None))
                continue
            why = record_problem(rec)
            folder = path.parent.name
            if not why and re.fullmatch(r"[0-9a-f]{40}", folder) and folder != rec["commit"]:
                why = f"its commit {rec['commit'][:12]} is not that of its folder {folder[:12]}"
            if why:
                problems.append(_skipped(path, why, rec))
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


def _busy(rec: dict, part: str = "perf") -> float:
    """The share of the machine's CPU that other processes took while the record's `bench perf` (or the
    user's benchmarks: part "user") timed (bench/cpu_meter.py; NaN for records before that measure,
    or where it was unavailable)."""
    try:
        share = rec[part]["contention"]["others_cpu_share"]
    except (KeyError, TypeError):
        return math.nan
    return float(share) if _number(share) and 0 <= float(share) <= 64 else math.nan


def point_key(rec: dict) -> str:
    """A point of the series: a commit, or a commit's dirty tree (measured, but not that commit)."""
    return rec["commit"][:12] + ("+dirty" if rec.get("dirty") else "")


def _digest(value) -> str | None:
    if value is None:
        return None
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]


def settings_of(rec: dict) -> dict[str, str]:
    """The settings a record's numbers were measured with, per part, as keys (JSON of [field, value] pairs;
    a value is None when the record does not store it): perf by bench perf's sizes and the device; the user's
    benchmarks by the digest of their files; the
    study's accuracies by the study (config digest), its *_to_target numbers by the study and the target."""
    perf, study, user = rec.get("perf") or {}, rec.get("study") or {}, rec.get("user") or {}
    device = rec["machine"].get("device")
    target = study.get("target_acc")
    digest = study.get("config_digest")
    return {"perf": json.dumps([["sizes", _digest(perf.get("sizes"))],
                                ["device", device if isinstance(device, str) else None]]),
            "user": json.dumps([["benchmarks", user.get("digest") if isinstance(user.get("digest"), str) else None]]),
            "accuracy": json.dumps([["study", digest if isinstance(digest, str) else None]]),
            "to_target": json.dumps([["study", digest if isinstance(digest, str) else None],
                                     ["target", float(target) if _number(target) else None]])}


def record_row(rec: dict) -> dict:
    """What a record says of its point and machine: a row of observations, and of the commit order of every
    record read (order.py), values or not."""
    return {"machine": rec["machine"]["id"], "point": point_key(rec), "commit": rec["commit"], "load": _load(rec),
            "busy": _busy(rec), "dirty": bool(rec.get("dirty")),
            "describe": str(rec.get("describe") or rec["commit"][:7]),
            "subject": str(rec.get("subject") or ""), "commit_date": rec["commit_date"],
            "generation": rec["generation"] if _is_number(rec.get("generation")) else -1,
            "started": str(rec.get("started") or ""), "record": rec["_path"]}


def observations(records: list[dict]) -> pd.DataFrame:
    """One row per tracked value: quantity, kind, unit, direction, machine, point (commit), sample, value, and
    the settings it was measured with (settings_of)."""
    rows = []
    for rec in records:
        settings = settings_of(rec)
        base = record_row(rec)
        for name, fig in ((rec.get("perf") or {}).get("figures") or {}).items():
            kind = _perf_kind(fig)
            values = fig.get("values") or [fig.get("median")]
            bound = fig.get("target") if kind == "agreement" and _number(fig.get("target")) else None
            for j, value in enumerate(values):
                rows.append({**base, "quantity": f"perf.{name}", "kind": kind, "timed": kind in TIMED_KINDS,
                             "unit": str(fig.get("unit", "")),
                             "higher_is_better": bool(fig.get("higher_is_better", True)), "bound": bound,
                             "settings": settings["perf"], "sample": f"repeat {j}", "value": float(value)})
        for name, fig in ((rec.get("user") or {}).get("figures") or {}).items():
            kind = str(fig.get("kind", "absolute"))
            for j, value in enumerate(fig.get("values") or [fig.get("median")]):
                rows.append({**base, "busy": _busy(rec, "user"), "load": math.nan, "quantity": f"user.{name}",
                             "kind": kind, "timed": fig.get("timed") is True, "unit": str(fig.get("unit", "")),
                             "higher_is_better": bool(fig.get("higher_is_better", False)), "bound": None,
                             "settings": settings["user"], "sample": f"repeat {j}", "value": float(value)})
        for cell, entry in ((rec.get("study") or {}).get("cells") or {}).items():
            for field, (kind, higher, unit) in STUDY_FIELDS.items():
                for seed, value in zip(entry["seeds"], entry.get(field) or []):
                    if value is None:
                        continue
                    rows.append({**base, "quantity": f"study.{cell}.{field}", "kind": kind, "timed": False,
                                 "unit": unit, "higher_is_better": higher, "bound": None, "settings": settings[kind],
                                 "sample": f"seed {seed}", "value": math.inf if value == "inf" else float(value)})
    table = pd.DataFrame(rows, columns=["quantity", "kind", "timed", "unit", "higher_is_better", "bound", "machine",
                                        "load", "busy", "point", "commit", "dirty", "describe", "subject",
                                        "commit_date", "generation", "started", "record", "settings", "sample",
                                        "value"])
    bound = table["kind"].isin(MACHINE_BOUND)
    if table.loc[bound, "machine"].nunique() > 1:  # absolute times: one series per machine
        table.loc[bound, "quantity"] = table.loc[bound, "quantity"] + "@" + table.loc[bound, "machine"]
    table["name"] = table["quantity"]  # the quantity before settings.split_by_settings names its groups
    return table


def series_of(table: pd.DataFrame, points: list[str]) -> dict[str, dict]:
    """quantity -> {meta, points (in order, those measured), values (one array per point), records}."""
    out = {}
    rank = {p: i for i, p in enumerate(points)}
    table = table[table["point"].isin(rank)]
    for quantity, g in table.groupby("quantity", sort=True):
        first = g.iloc[0]
        study = str(quantity).startswith("study.")
        pts = sorted(g["point"].unique(), key=rank.get)
        values = []
        for p in pts:
            rows = g[g["point"] == p]
            if study:  # re-runs of a deterministic study: one value per seed
                values.append(rows.groupby("sample")["value"].median().to_numpy(float))
            else:
                values.append(rows["value"].to_numpy(float))
        out[quantity] = {"kind": first["kind"], "timed": bool(first["timed"]), "unit": first["unit"],
                         "higher_is_better": bool(first["higher_is_better"]),
                         "bound": first["bound"], "points": pts, "values": values,
                         "machines": sorted(g["machine"].unique()),
                         "records": {p: g[g["point"] == p].groupby("record")["value"].median().to_numpy(float)
                                     for p in pts}}
    return out
