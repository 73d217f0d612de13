"""The paper's qualitative claims as checks over a study's results, each with the evidence it needs.

Every claim names the cells and seeds it needs (``Claim.needs``). Its verdict is ``holds`` or ``fails``
only when all of them ran; otherwise ``incomplete``, listing what is missing. Comparisons are paired over
seeds and state their test and interval in the verdict's text; where the interval (or test) does not
decide, the verdict is ``inconclusive``. A diverged seed counts: as a failure where a claim says a method
trains. Each verdict says which metric it read: the mean of the local models over all n workers where
every run scored them all, else the averaged model.

``python -m analysis claims DIR``: the table on stdout and in ``DIR/claims.csv``; the report has it as a
section, and ``regress`` counts a claim that held in the baseline and fails now as a regression.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.claims.base import (CLAIMS, FAILS, HOLDS, INCOMPLETE, INCONCLUSIVE, LEGACY_VERDICTS, MIN_SEEDS,
                                  VERDICTS, Claim, Verdict)
from analysis.errors import DamagedFile
from analysis.claims.evidence import Evidence
from analysis.consensus import read_trace
from analysis.claims import table1, gossip, scaling, bits, topology  # noqa: F401  (each registers its claims)

# "asserts" and "reason" came later: appended, so readers of the older columns read claims.csv as before
COLUMNS = ["claim", "expected", "needs", "measured", "verdict", "reads", "missing", "asserts", "reason"]
# a verdict in words for the report: "fails" beside a claim that something fails read as a double negative
SAID = {HOLDS: "holds", FAILS: "does not hold", INCONCLUSIVE: "undecided", INCOMPLETE: "not tested here"}


def read_traces(run_dir: Path) -> pd.DataFrame | None:
    """Every consensus/*/traces.csv under ``run_dir``; a damaged one is left out (the claims that read traces
    then say which are missing)."""
    frames = []
    for f in sorted((Path(run_dir) / "consensus").glob("*/traces.csv")):
        try:
            frames.append(read_trace(f))
        except (OSError, ValueError, DamagedFile):
            continue
    return pd.concat(frames, ignore_index=True) if frames else None


def check_claims(summary: pd.DataFrame | None, traces: pd.DataFrame | None = None,
                 min_seeds: int = MIN_SEEDS) -> pd.DataFrame:
    """One row per claim: claim, expected, needs, measured, verdict, reads (the metric), missing."""
    ev = Evidence(summary, traces, min_seeds)
    rows = []
    for c in CLAIMS:
        try:
            v = c.check(ev)
        except (KeyError, ValueError, TypeError) as err:  # a summary without a column the claim needs
            v = Verdict(INCOMPLETE, f"cannot be checked on these results ({type(err).__name__}: {err})",
                        missing=(f"a column or value the claim reads ({err})",))
        reason = v.reason or ("the test or interval in the measurement does not decide"
                              if v.verdict == INCONCLUSIVE else v.measured)
        rows.append({"claim": c.name, "expected": c.expected, "needs": c.needs, "measured": v.measured,
                     "verdict": v.verdict, "reads": v.reads, "missing": " | ".join(v.missing),
                     "asserts": c.asserts, "reason": reason})
    return pd.DataFrame(rows, columns=COLUMNS)


def claims_markdown(table: pd.DataFrame, min_seeds: int = MIN_SEEDS) -> str:
    """The verdicts first, each claim by what it asserts with a one-line reason; then what each measured and
    needs. A study that is a slice (the default study) says why its claims are "not tested here"."""
    untested = int((table["verdict"] == INCOMPLETE).sum())
    head = (f"Each of the paper's claims checked on this study's runs (accuracies in %). A claim *holds* or *does not "
            f"hold* only when every cell it needs ran, with {min_seeds} seeds or more where it compares runs; "
            "*undecided* when its interval or test does not decide; *not tested here* when this study does not "
            "hold its cells.")
    if untested:
        head += (f" {untested} of {len(table)} claims are not tested here: that is no failure, only that this study "
                 "runs other cells (or fewer seeds) than those claims need; the study named in each claim's *needs* "
                 "tests it.")
    shown = pd.DataFrame({"the paper's claim": table["asserts"], "verdict": table["verdict"].map(SAID),
                          "why": table["reason"], "id": [f"`{c}`" for c in table["claim"]]})
    notes = "\n".join(f"- **{r.asserts}** (`{r.claim}`): {r.expected}. *Measured*: {r.measured}. *Needs*: {r.needs}."
                      + (f" *Reads*: {r.reads}." if r.reads else "") for r in table.itertuples())
    return (head + "\n\n" + shown.to_markdown(index=False, disable_numparse=True)
            + "\n\nWhat each claim states, measured, needs and reads:\n\n" + notes + "\n")


__all__ = ["CLAIMS", "Claim", "Verdict", "Evidence", "check_claims", "claims_markdown", "read_traces", "HOLDS",
           "FAILS", "INCONCLUSIVE", "INCOMPLETE", "VERDICTS", "LEGACY_VERDICTS", "MIN_SEEDS"]
