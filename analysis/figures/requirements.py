"""What a figure can ask of a study's cells, read before anything runs: the cells as figures see them (Grid),
the checks several figures share, and ``unmet``, which the DAG build (workflow/rules/common.smk) calls.

A figure's own requirement is the ``needs`` function of its module, given to ``@figure`` (base.py); its
``draw`` calls the same function on the runs it is handed (one row per run instead of one per cell), so a
study refused when its DAG is built and a figure that cannot be drawn give the same reason. A figure that
declares none needs training runs only (base.trains). Data can still fall short where cells cannot tell
(every seed diverged, no gap to all-reduce to fit): then ``draw`` says why and the figure's job fails.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pandas as pd

from analysis.figures.base import catalog
from analysis.load import FAULT_COLUMNS, fault_columns
from analysis.selection import iid_only, usable

CELL_COLUMNS = ["task", "algorithm", "compressor", "topology", "nodes", "data"]


@dataclass(frozen=True)
class Grid:
    """A study's cells as the figures see them: ``cells`` has one row per cell (when the DAG is built)
    or per run (when a figure is drawn) with at least CELL_COLUMNS; the rest is what a study says
    outside its blocks (its tuning grid and the cells that search it, its consensus: block) and the
    metrics its task records (None: not known, e.g. at draw time)."""

    cells: pd.DataFrame
    tune_grid: Mapping[str, Sequence] = field(default_factory=dict)  # knob -> its values
    tuned: Mapping[str, Sequence[str]] = field(default_factory=dict)  # cell -> the knobs it searches
    consensus: Mapping = field(default_factory=dict)
    metrics: Sequence[str] | None = None


def iid_runs(grid: Grid) -> pd.DataFrame:
    """The usable cells (or runs) of the grid's preferred i.i.d. partition."""
    return iid_only(usable(grid.cells))


def unmet(figures: Sequence[str], grid: Grid) -> list[tuple[str, str]]:
    """(figure, why) for each of ``figures`` the grid cannot give, in the order asked."""
    known = catalog()
    return [(name, why) for name in figures if (why := known[name].needs(grid)) is not None]


def cells_frame(rows: Sequence[Mapping]) -> pd.DataFrame:
    """A cells frame from one mapping per cell (a run's resolved settings): CELL_COLUMNS, in that order, then
    FAULT_COLUMNS read from its ``faults`` setting as analysis.load reads them from a run."""
    return pd.DataFrame([{**{key: row.get(key) for key in CELL_COLUMNS}, **fault_columns(row.get("faults"))}
                         for row in rows], columns=CELL_COLUMNS + FAULT_COLUMNS)


# -- the network a cell or run had (FAULT_COLUMNS), for the faults figure and its requirement ------------------
def with_faults(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every FAULT_COLUMNS column (analysis.load.fault_columns): a frame without them (an
    older summary, a hand-made one) is of runs on a perfect network."""
    missing = {k: v for k, v in fault_columns(None).items() if k not in frame}
    return frame.assign(**missing) if missing else frame


def _nothing_else(f: pd.DataFrame) -> pd.Series:
    """No outage, no late message, every worker in every round (no activation, churn or pairwise gossip)."""
    return ((f["outages"] == 0) & (f["late"] == 0) & (f["active"] == 1) & (f["absences"] == 0)
            & ~f["pairwise"].astype(bool))


def lossy(frame: pd.DataFrame) -> pd.Series:
    """Runs that lost messages at a rate (independently or in bursts) and had nothing else wrong with the
    network: no outage, no symmetric losses, no straggler, nothing late, every worker present."""
    f = with_faults(frame)
    return (f["drop"] > 0) & ~f["drop_symmetric"].astype(bool) & (f["straggler_mean"] == 0) & _nothing_else(f)


def straggled(frame: pd.DataFrame) -> pd.Series:
    """Runs whose workers straggled exponentially (straggler_mean > 0) on a network that lost nothing."""
    f = with_faults(frame)
    return (f["straggler_mean"] > 0) & (f["drop"] == 0) & _nothing_else(f)


def perfect(frame: pd.DataFrame) -> pd.Series:
    """Runs on a perfect network: nothing lost, nobody slowed."""
    f = with_faults(frame)
    return (f["drop"] == 0) & (f["straggler_mean"] == 0) & _nothing_else(f)
