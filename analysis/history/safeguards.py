"""The safeguards of `python -m analysis history` against a noisy machine, on by default, the same that CI's
`make track-check` relies on:

* **busy records are left out** (leave_out_busy): the timed figures (perf, and the user's time_*) of a
  record during whose timing other processes took more than ``--max-busy`` of the machine's CPU
  (bench/cpu_meter.py measures it), or,
  for records from before that measure, whose `bench perf` started with a 1-minute load average above
  ``--max-load`` per core. The study's numbers are kept: they do not depend on the machine's load.
* **a timing regression must be confirmed** (confirm): the newest commit's timed figure (a perf time or
  ratio, a user's time_* benchmark) is a regression only when at least ``--confirm`` of its records, each on its own, are worse than the
  commits before by more than the tolerance. With fewer, the verdict is "unconfirmed" (exit status 0, one
  line on stderr saying to measure the commit again). A one-off stray (a cold first record strayed by up to
  134 % on a quiet machine) is not a regression; a real slowdown stays slow in the next record too. The
  study's numbers are deterministic (docs/tracking.md): one record says all.
* ratios are pooled across machines and absolute times kept per machine (records.observations).

``--keep-busy`` and ``--confirm 1`` turn the first two off."""
from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from analysis.history.changepoint import change, verdict

MAX_BUSY = 0.25  # others' share of the CPU: on 2 cores, one other process spinning is 0.5
MAX_LOAD = 1.5   # 1-minute load average per core at bench perf's start (records without the share)
CONFIRM = 2


def _number_type(within, says: str):
    """An argparse type: a float for which ``within(value)`` holds, else ``TEXT must be <says>``."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not within(value):
            raise argparse.ArgumentTypeError(f"{text!r} must be {says}")
        return value
    return parse


_share = _number_type(lambda v: 0 <= v <= 1, "a share of the CPU, in [0, 1]")
_per_core = _number_type(lambda v: math.isfinite(v) and v >= 0, "a finite load per core >= 0")


def _records(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1 (records of the newest commit)")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-busy", type=_share, default=MAX_BUSY, metavar="SHARE",
                   help="leave out the perf figures of records during whose bench perf other processes took more "
                   f"than SHARE of the machine's CPU (default {MAX_BUSY:g}; the study's numbers are kept)")
    p.add_argument("--max-load", type=_per_core, default=MAX_LOAD, metavar="PER_CORE",
                   help="for records without that measure (older bench track): leave out their perf figures when "
                   f"bench perf started with a 1-minute load average above PER_CORE x cores (default {MAX_LOAD:g})")
    p.add_argument("--keep-busy", action="store_true", help="keep the perf figures of busy records too")
    p.add_argument("--confirm", type=_records, default=CONFIRM, metavar="N",
                   help="a perf figure of the newest commit regresses only when N of its records, each on its own, "
                   f"are worse than the tolerance (default {CONFIRM}; fewer: 'unconfirmed', exit 0)")


def leave_out_busy(table: pd.DataFrame, args) -> tuple[pd.DataFrame, list[str]]:
    """``table`` without the perf figures of busy records, and the note that says how many went."""
    if args.keep_busy:
        return table, []
    perf = table["timed"].astype(bool)  # perf timings and the user's time_* (records.observations)
    by_share = perf & (table["busy"] > args.max_busy)
    by_load = perf & table["busy"].isna() & (table["load"] > args.max_load)
    if not (by_share | by_load).any():
        return table, []
    parts = []
    if by_share.any():
        parts.append(f"{table.loc[by_share, 'record'].nunique()} where other processes took more than "
                     f"{args.max_busy:.0%} of the CPU while it was timed (--max-busy)")
    if by_load.any():
        parts.append(f"{table.loc[by_load, 'record'].nunique()} whose bench perf started with a load average above "
                     f"{args.max_load:g} per core (--max-load; records without the CPU measure)")
    note = f"analysis history: note: perf figures of busy records left out: {'; '.join(parts)}; --keep-busy keeps them"
    return table[~(by_share | by_load)], [note]


def confirm(newest: pd.DataFrame, series: dict, newest_point: str, needed: int) -> pd.DataFrame:
    """``newest`` with its timing regressions that fewer than ``needed`` records of the newest commit show,
    each on its own, turned into "unconfirmed"; the column ``records_worse`` says "k of n"."""
    newest = newest.copy()
    newest["records_worse"] = ""
    for i, row in newest.iterrows():
        s = series[row["quantity"]]
        if row["verdict"] != "regression" or not s["timed"]:
            continue
        medians = np.asarray(s["records"].get(newest_point, []), float)
        worse = sum(verdict(change(row["before_median"], float(m), row["mode"]), s["higher_is_better"],
                            row["tolerance"]) == "regression" for m in medians)
        newest.at[i, "records_worse"] = f"{worse} of {len(medians)}"
        if worse < needed:
            newest.at[i, "verdict"] = "unconfirmed"
    return newest


def unconfirmed_lines(newest: pd.DataFrame, describe: str, needed: int) -> list[str]:
    """One stderr line per unconfirmed regression of the newest commit, saying what to do."""
    lines = []
    for _, r in newest[newest["verdict"] == "unconfirmed"].iterrows():
        size = f"{r['change']:+.1%}" if r["mode"] == "rel" else f"{r['change']:+.4g}"
        lines.append(f"UNCONFIRMED {r['quantity']}: {r['before_median']:.4g} -> {r['newest_median']:.4g} ({size}) at "
                     f"{describe}, worse in {r['records_worse']} records where {needed} are needed: measure this "
                     "commit again (make track) to confirm or clear it")
    return lines
