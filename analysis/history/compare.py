"""`python -m analysis history DIR --compare A B`: every quantity measured at both commits, side by side, as
`asv compare A B` shows two commits: A's and B's medians, the change, a two-sided Mann-Whitney p-value of
all of B's values against all of A's (repeats, seeds; a seed's re-runs by their median), the records each
commit has, and a verdict against the kind's tolerance: worse, better, or same (beyond the tolerance but
not significant: "within noise"). It reads the records left after the filters (--kinds, --only,
--clean-only, the busy-machine safeguards) and writes compare.csv; the exit status is 0 whatever it finds
(the gate is the newest-commit check)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.errors import UsageError
from analysis.history.changepoint import _median, change, mann_whitney, tolerance, verdict

COLUMNS = ["quantity", "kind", "unit", "a_median", "b_median", "change", "mode", "tolerance", "p", "a_records",
           "b_records", "verdict"]


def compare(series: dict, a: str, b: str, tolerances: dict, alpha: float, overridden=frozenset()) -> pd.DataFrame:
    """One row per quantity measured at both points ``a`` and ``b`` (point keys), in quantity order."""
    rows = []
    for quantity, s in sorted(series.items()):
        if a not in s["points"] or b not in s["points"]:
            continue
        va, vb = (s["values"][s["points"].index(p)] for p in (a, b))
        mode, tol = tolerance(s, tolerances, overridden)
        size = change(_median(va), _median(vb), mode)
        p = mann_whitney(vb[~np.isnan(vb)], va[~np.isnan(va)])
        said = {"regression": "worse", "improvement": "better"}.get(verdict(size, s["higher_is_better"], tol), "same")
        if said != "same" and p > alpha and not math.isinf(size):
            said = "within noise"
        rows.append({"quantity": quantity, "kind": s["kind"], "unit": s["unit"], "a_median": _median(va),
                     "b_median": _median(vb), "change": size, "mode": mode, "tolerance": tol, "p": p,
                     "a_records": len(s["records"][a]), "b_records": len(s["records"][b]), "verdict": said})
    return pd.DataFrame(rows, columns=COLUMNS)


def point_of(full: str, rev: str, points: list[str]) -> str:
    """The point of a commit (its clean records), or one line saying it has none left."""
    if full[:12] not in points:
        raise UsageError(f"--compare {rev}: no record of {full[:12]} left to compare (measure it: bench track "
                         "--commits REV, or see --clean-only, --kinds, --only and the busy-machine filter)")
    return full[:12]


def lines(table: pd.DataFrame, a: str, b: str) -> list[str]:
    """The table as text, worst first, then a count of the verdicts."""
    if table.empty:
        return [f"compare {a} {b}: no quantity measured at both"]
    order = {"worse": 0, "better": 1, "within noise": 2, "same": 3}
    shown = table.assign(rank=table["verdict"].map(order)).sort_values(["rank", "quantity"])
    out = [f"compare {a} -> {b}: {len(table)} quantities (change of the median; Mann-Whitney p of all values)"]
    for r in shown.itertuples():
        size = f"{r.change:+.1%}" if r.mode == "rel" else f"{r.change:+.4g}"
        out.append(f"  {r.verdict:>12}  {r.quantity}: {r.a_median:.4g} -> {r.b_median:.4g} {r.unit} ({size}, p {r.p:.2g}; "
                   f"records {r.a_records} and {r.b_records})")
    counts = table["verdict"].value_counts()
    out.append("  " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return out
