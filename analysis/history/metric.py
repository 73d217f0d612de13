"""One tracked quantity at one commit, judged against a reference: what `bench bisect` asks of each probe, in a
process of its own (bench never imports analysis).

    python -m analysis.history.metric PATH... --metric NAME [--commit SHA] [--reference MEDIAN] [--tol T]

PATH is a record of `bench track` or a folder of them; --commit keeps only the clean records of that commit.
Prints one JSON object: the quantity's values in those records (perf repeats pooled, a seed's re-runs by their
median) and their median, its kind, direction and unit, the tolerance (the kind's, an agreement figure's own
bound, or --tol), and the state: with --reference, bad when the median is worse than the reference by more than
the tolerance, else good; without, good (the reference itself); skip when nothing was measured. Exit 2 on bad
input (one line)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from analysis.argparsing import Parser
from analysis.errors import UsageError
from analysis.history.changepoint import _median, change, verdict
from analysis.history.records import TOLERANCES, load_records, observations, point_key


def metric_values(records: list[dict], metric: str) -> tuple[list[float], dict | None]:
    """The values of ``metric`` in ``records`` (perf repeats pooled, a seed's re-runs by their median) and
    its meta (kind, direction, bound, unit), or ([], None)."""
    table = observations(records)
    name = metric.split("@")[0]
    rows = table[table["quantity"].str.split("@").str[0] == name]
    if rows.empty:
        return [], None
    first = rows.iloc[0]
    if first["kind"] in ("accuracy", "to_target"):
        values = rows.groupby("sample")["value"].median().to_numpy(float)
    else:
        values = rows["value"].to_numpy(float)
    return [float(v) for v in values], {"kind": first["kind"], "higher_is_better": bool(first["higher_is_better"]),
                                        "bound": first["bound"], "unit": first["unit"]}


def tolerance_of(meta: dict, tol: float | None = None) -> tuple[str, float]:
    """(mode, tolerance) of a quantity: its kind's, an agreement figure's own bound, or ``tol`` when given."""
    mode, default = TOLERANCES[meta["kind"]]
    if meta["kind"] == "agreement" and isinstance(meta.get("bound"), (int, float)):
        default = float(meta["bound"])
    return mode, default if tol is None else tol


def judge(values: list[float], reference: float | None, higher_is_better: bool, mode: str, tol: float) -> dict:
    """{values, median, change, state, mode, tolerance}: state skip (nothing measured), or bad when the median is
    worse than ``reference`` beyond ``tol``, else good; the reference's own values (``reference`` None) are good."""
    median = _median(values) if len(values) else math.nan
    out = {"values": [float(v) for v in values], "median": median, "mode": mode, "tolerance": tol}
    if math.isnan(median):
        return {**out, "values": [], "change": math.nan, "state": "skip"}
    size = 0.0 if reference is None else change(reference, median, mode)
    bad = reference is not None and verdict(size, higher_is_better, tol) == "regression"
    return {**out, "change": size, "state": "bad" if bad else "good"}


def records_at(paths: list[Path], commit: str | None) -> list[dict]:
    """The readable records of ``paths`` (files, or folders searched through); with ``commit``, its clean ones."""
    records = []
    for path in paths:
        if path.is_file():
            records += [r for r in load_records([path.parent])[0] if r["_path"] == str(path)]
        elif path.is_dir():
            records += load_records([path])[0]
        else:
            raise UsageError(f"{path}: no such record or folder")
    if commit is not None:
        records = [r for r in records if not r.get("dirty") and point_key(r) == commit[:12]]
    return records


def judged(paths: list[Path], metric: str, commit: str | None = None, reference: float | None = None,
           tol: float | None = None) -> dict:
    """What main prints: the judgement of ``metric`` in the records at ``paths``, with how many records were read
    and the quantity's kind, direction and unit (None where nothing was measured)."""
    records = records_at(paths, commit)
    values, meta = metric_values(records, metric) if records else ([], None)
    if meta is None:
        out = {**judge([], None, True, "rel", math.nan), "mode": None, "tolerance": None}
    else:
        out = judge(values, reference, meta["higher_is_better"], *tolerance_of(meta, tol))
    return {**out, "records": len(records), **{key: (meta or {}).get(key) for key in ("kind", "higher_is_better",
                                                                                      "unit")}}


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="python -m analysis.history.metric", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.add_argument("--metric", required=True, help="perf.<figure> or study.<cell>.<field>")
    p.add_argument("--commit", default=None, help="only the clean records of this commit")
    p.add_argument("--reference", type=float, default=None, help="the median the values are judged against")
    p.add_argument("--tol", type=float, default=None, help="the tolerance in place of the kind's")
    try:
        args = p.parse_args(argv)
        out = judged(args.paths, args.metric, args.commit, args.reference, args.tol)
    except UsageError as err:
        print(f"analysis history metric: error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
