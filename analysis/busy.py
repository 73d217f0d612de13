"""Measured times taken on a busy machine. A run whose compute time was measured (`bench run`'s default) records in
run.json's ``timing`` what other processes took of the machine's CPU meanwhile (bench/run/busy.py); summary.csv
carries it per run (``others_cpu_share``) and per cell (``cell_others_cpu_share``, the most of its runs), and
``summarize`` and ``report`` say which cells' times were taken on a busy machine. A run recorded before the share
was is unknown, never quiet; a run with a modelled compute time has no measured time to doubt."""
from __future__ import annotations

import math

import pandas as pd

# above this share of the machine's CPU taken by others, a measured compute time is not the run's own: on the issue's
# 2-core machine one other job spinning (0.5) stretched the MNIST-1D MLP's 0.05 s of compute to 0.92-1.16 s, and a
# quarter (half a core of 2, one core of 4) is where a run's threads no longer find an idle core (issue 57)
BUSY_SHARE = 0.25


def measured(runs: pd.DataFrame) -> pd.Series:
    """Whether each run's compute time was measured; a table without the column (an older summary) reads as
    measured, bench run's default, so that its share is unknown rather than not asked for."""
    if "compute_measured" not in runs:
        return pd.Series(True, index=runs.index)
    return runs["compute_measured"].map(lambda v: v is not False and str(v) != "False")


def _share(runs: pd.DataFrame) -> pd.Series:
    if "others_cpu_share" not in runs:
        return pd.Series(math.nan, index=runs.index)
    return pd.to_numeric(runs["others_cpu_share"], errors="coerce")


def cell_share(runs: pd.DataFrame) -> pd.Series:
    """Each run's cell's share: the most of its runs that measured compute, NaN where one of them did not record
    it (an unknown run may have been the busy one) or none measured."""
    share = _share(runs).where(measured(runs))
    unknown = share.isna() & measured(runs)

    def most(g: pd.Series) -> float:
        return math.nan if unknown[g.index].any() or g.isna().all() else float(g.max())

    return share.groupby(runs["cell"], dropna=False).transform(most)


def _cells(cells: list[str]) -> str:
    return f"{cells[0]}" + (f" and {len(cells) - 1} more" if len(cells) > 1 else "")


def busy_note(summary: pd.DataFrame) -> str | None:
    """One sentence naming the cells whose measured times were taken on a busy machine, or None."""
    share = _share(summary).where(measured(summary))
    busy = summary[share > BUSY_SHARE]
    if busy.empty:
        return None
    cells = sorted(busy["cell"].astype(str).unique())
    return (f"the measured compute times of {len(cells)} of {summary['cell'].nunique()} cells were taken on a busy "
            f"machine (other processes took up to {share.max():.0%} of its CPU, above {BUSY_SHARE:.0%}): "
            f"{_cells(cells)}; their times are not comparable (run them again on a quiet machine, or set "
            "compute_time to model the device)")


def unknown_note(summary: pd.DataFrame) -> str | None:
    """One sentence naming the cells with measured times that do not say how busy the machine was, or None."""
    unknown = summary[_share(summary).isna() & measured(summary)]
    if unknown.empty:
        return None
    cells = sorted(unknown["cell"].astype(str).unique())
    return (f"how busy the machine was is not known for the measured compute times of {len(cells)} "
            f"cell{'s' if len(cells) > 1 else ''} "
            f"({_cells(cells)}): their runs did not record it")


def report_note(summary: pd.DataFrame) -> str:
    """The report's note next to its time numbers (empty when every time is modelled or measured on a quiet
    machine)."""
    from analysis.report_html import md_text  # cell names are text, never markup

    notes = [n for n in (busy_note(summary), unknown_note(summary)) if n]
    return "".join(f"**Note**: {md_text(n[0].upper() + n[1:])}.\n\n" for n in notes)
