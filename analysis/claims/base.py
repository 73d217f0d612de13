"""Verdicts, the claim registry, and how partial verdicts combine.

A claim's check returns a :class:`Verdict`: ``holds`` or ``fails`` only when every cell and seed the claim
names was run; ``inconclusive`` when the evidence is all there but its interval (or test) does not decide;
``incomplete`` when something the claim needs is missing, with the list of what.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

HOLDS, FAILS, INCONCLUSIVE, INCOMPLETE = "holds", "fails", "inconclusive", "incomplete"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, INCOMPLETE)
# what baselines written before the evidence rule say for "the study has nothing that tests it"
LEGACY_VERDICTS = {"not run": INCOMPLETE}

# The paper's Table 1 reports the mean of 3 runs; a comparison over fewer seeds has no interval worth the name
MIN_SEEDS = 3
LEVEL = 0.95  # of every interval and test in a verdict


@dataclass(frozen=True)
class Verdict:
    verdict: str
    measured: str
    reads: str = ""  # the metric the verdict read, in words
    missing: tuple[str, ...] = field(default=())
    reason: str = ""  # why, in one line a newcomer reads (the report's "why" column)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")


@dataclass(frozen=True)
class Claim:
    name: str  # the id baselines and regress key on: never renamed
    asserts: str  # what the paper asserts, as a statement that "holds" or "does not hold" (the report's name)
    expected: str
    needs: str  # the cells and seeds the verdict needs, in words
    check: Callable


CLAIMS: list[Claim] = []


def claim(name: str, asserts: str, expected: str, needs: str):
    def register(check):
        CLAIMS.append(Claim(name, asserts, expected, needs, check))
        return check
    return register


def incomplete(missing: list[str], reads: str = "", have: str = "") -> Verdict:
    shown = "; ".join(missing[:8]) + (f"; and {len(missing) - 8} more" if len(missing) > 8 else "")
    # a study that does not hold the claim's cells (the default study is a slice) has not tested it: no failure
    reason = (f"needs cells or seeds this study does not run ({len(missing)} missing, e.g. {missing[0]})"
              if missing else "needs cells this study does not run")
    return Verdict(INCOMPLETE, (f"{have}; " if have else "") + f"missing: {shown}", reads, tuple(missing), reason)


def combine(parts: list[str]) -> str:
    """All parts of a claim must hold: one failing part fails it, an undecided part leaves it inconclusive."""
    if FAILS in parts:
        return FAILS
    if INCONCLUSIVE in parts:
        return INCONCLUSIVE
    return HOLDS


def rank_trend(x, y, alternative: str, alpha: float = 0.05) -> tuple[str, float, float]:
    """(verdict, ρ, p) of the claim that y rises with x ("greater") or falls ("less"): holds when the one-sided
    permutation test of Spearman's ρ rejects at ``alpha``, fails when the opposite one-sided test does."""
    from analysis.claims.stats import spearman_test

    rho, p = spearman_test(x, y, alternative)
    _, p_other = spearman_test(x, y, "less" if alternative == "greater" else "greater")
    return (HOLDS if p <= alpha else FAILS if p_other <= alpha else INCONCLUSIVE), rho, p


def decide(low: float, high: float, threshold: float, above: bool) -> str:
    """Whether an interval [low, high] lies on the claimed side of ``threshold`` (``above``: the claim is
    "greater than"), on the other side, or straddles it."""
    if above:
        return HOLDS if low > threshold else (FAILS if high <= threshold else INCONCLUSIVE)
    return HOLDS if high <= threshold else (FAILS if low > threshold else INCONCLUSIVE)
