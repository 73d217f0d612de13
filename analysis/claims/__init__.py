"""The paper's qualitative claims as checks over a study's results, each with the evidence it needs.

Every claim names the cells and seeds it needs (``Claim.needs``). Its verdict is ``holds`` or ``fails``
only when all of them ran; otherwise ``incomplete``, listing what is missing. Comparisons are paired over
seeds and state their test and interval in the verdict's text; where the interval (or test) does not
decide, the verdict is ``inconclusive``. A diverged seed counts: as a failure where a claim says a method
trains. Each verdict says which metric it read: the mean of the local models over all n workers where
every run scored them all, else the averaged model.

``python -m analysis claims DIR``: the table on stdout and in ``DIR/claims.csv`` (the report writes it too); the
report has it as a section, and ``regress`` counts a claim that held in the baseline and fails now as a regression.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.claims.base import (CLAIMS, FAILS, HOLDS, INCOMPLETE, INCONCLUSIVE, LEGACY_VERDICTS, MIN_SEEDS,
                                  VERDICTS, Claim, Verdict)
from analysis.errors import DamagedFile
from analysis.files import write_atomically
from analysis.claims.evidence import Evidence
from analysis.consensus import read_trace
from analysis.claims import table1, gossip, scaling, bits, topology  # noqa: F401  (each registers its claims)

COLUMNS = ["claim", "expected", "needs", "measured", "verdict", "reads", "missing"]


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
        rows.append({"claim": c.name, "expected": c.expected, "needs": c.needs, "measured": v.measured,
                     "verdict": v.verdict, "reads": v.reads, "missing": " | ".join(v.missing)})
    return pd.DataFrame(rows, columns=COLUMNS)


def write_claims(run_dir: Path, table: pd.DataFrame) -> Path:
    """DIR/claims.csv, written by the report (the pipeline's) and by ``python -m analysis claims``."""
    return write_atomically(Path(run_dir) / "claims.csv", lambda tmp: table.to_csv(tmp, index=False))


def claims_markdown(table: pd.DataFrame, min_seeds: int = MIN_SEEDS) -> str:
    head = (f"Each of the paper's qualitative claims checked on this study's runs (accuracies in %). A verdict is "
            f"*holds* or *fails* only when every cell the claim needs ran, with {min_seeds} seeds or more where it "
            "compares runs; *inconclusive* when its interval or test does not decide; *incomplete* lists what is "
            "missing.\n\n")
    shown = table[["claim", "verdict", "measured"]]
    notes = "\n".join(f"- **{r.claim}**: {r.expected}. *Needs*: {r.needs}." + (f" *Reads*: {r.reads}." if r.reads else "")
                      for r in table.itertuples())
    return head + shown.to_markdown(index=False, disable_numparse=True) + "\n\nWhat each claim states, needs and reads:\n\n" + notes + "\n"


__all__ = ["CLAIMS", "Claim", "Verdict", "Evidence", "check_claims", "claims_markdown", "read_traces", "HOLDS",
           "FAILS", "INCONCLUSIVE", "INCOMPLETE", "VERDICTS", "LEGACY_VERDICTS", "MIN_SEEDS"]
