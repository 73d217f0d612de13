"""What each figure needs of a study, read from its cells before anything runs.

A study that asks for a figure its cells cannot give is refused when its DAG is built
(workflow/rules/common.smk), with one line naming the figure and the reason; the figure's ``draw``
gives the same reason when the runs it is handed fall short in the same way, since it calls the
same function on them (one row per run instead of one per cell). Every other figure draws from a
single method up. Data can still fall short where cells cannot tell (every seed diverged, no gap
to all-reduce to fit): then ``draw`` says why and the figure's job fails.

A figure's requirement is the function here of its name, marked ``@needs``; a figure without one needs
training runs only.

This module imports no plotting library: the DAG build reads it for every study.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import pandas as pd

from analysis.figures import FIGURES
from analysis.load import FAULT_COLUMNS, fault_columns
from analysis.selection import iid_only, usable

REFERENCE = "allreduce"  # the centralized reference every gap is measured against
CELL_COLUMNS = ["task", "algorithm", "compressor", "topology", "nodes", "data"]
SWEPT_KNOBS = ("lr", "gamma")  # what the sensitivity figure draws a curve against
NO_SUBOPTIMALITY = "needs runs with train_subopt (the lsq and logreg tasks record it)"
NO_FAULTS = ("needs runs on an unreliable network: a faults: setting with drop > 0 (losses at a rate) or an "
             "exponential straggler")


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


_NEEDS: dict[str, Callable[[Grid], str | None]] = {}  # figure -> its requirement, when more than training runs


def needs(requirement: Callable[[Grid], str | None]):
    """Marks ``requirement`` as what the figure of its name needs; a figure without one draws from any
    training runs (_trains)."""
    _NEEDS[requirement.__name__] = requirement
    return requirement


def _runs(grid: Grid) -> pd.DataFrame:
    return iid_only(usable(grid.cells))


def _trains(grid: Grid) -> str | None:
    return None if len(usable(grid.cells)) else "needs training runs (a block of cells)"


@needs
def gap_vs_nodes(grid: Grid) -> str | None:
    """All-reduce and a decentralized method at >= 2 shared node counts of one task, and one decentralized
    (topology, method) at >= 2 node counts: a gap against n is a line."""
    why = "needs all-reduce and decentralized runs at >= 2 node counts of one task"
    for _, g in _runs(grid).groupby("task"):  # any task will do: a study of several is drawn on its best
        ref = g["algorithm"] == REFERENCE
        if len(set(g.loc[ref, "nodes"]) & set(g.loc[~ref, "nodes"])) < 2:
            continue
        spread = g[~ref].groupby(["topology", "algorithm", "compressor"])["nodes"].nunique()
        if (spread >= 2).any():
            return None
        why = "no decentralized (topology, method) run at >= 2 node counts"
    return why


@needs
def accuracy_vs_spectral_gap(grid: Grid) -> str | None:
    """Decentralized runs on >= 2 topologies at one (task, n)."""
    runs = _runs(grid)
    dec = runs[runs["algorithm"] != REFERENCE]
    if "spectral_gap" in dec:
        dec = dec[dec["spectral_gap"].notna()]
    if dec.groupby(["task", "nodes"])["topology"].nunique().ge(2).any():
        return None
    return "needs decentralized runs on >= 2 topologies at one number of workers"


@needs
def lag_vs_consensus(grid: Grid) -> str | None:
    """>= 2 decentralized settings (method, topology, n) with an all-reduce run at the same task, data and
    n, in one data partition: a fit of the gap against the consensus distance needs two points."""
    runs = usable(grid.cells)
    keys = ["task", "data", "nodes"]
    ref = runs.loc[runs["algorithm"] == REFERENCE, keys].drop_duplicates()
    dec = runs[runs["algorithm"] != REFERENCE].merge(ref, on=keys)
    settings = dec.drop_duplicates(["task", "data", "algorithm", "compressor", "topology", "nodes"])
    if settings.groupby(["task", "data"]).size().ge(2).any():
        return None
    return ("needs >= 2 settings (method, topology, n) of decentralized runs with an all-reduce run at the "
            "same task, data and n")


@needs
def noniid_effect(grid: Grid) -> str | None:
    """One setting (task, topology, n, method) run on >= 2 data partitions."""
    runs = usable(grid.cells)
    partitions = runs.groupby(["task", "topology", "nodes", "algorithm", "compressor"])["data"].nunique()
    if partitions.ge(2).any():
        return None
    return "no setting (task, topology, n, method) was run on two or more data partitions"


@needs
def gap_vs_alpha(grid: Grid) -> str | None:
    """A method and all-reduce run on the same task, n and >= 2 data partitions."""
    runs = usable(grid.cells)
    runs = runs.assign(data=runs["data"].astype(str))
    ref = set(map(tuple, runs.loc[runs["algorithm"] == REFERENCE, ["task", "nodes", "data"]].drop_duplicates()
                  .itertuples(index=False)))
    others = runs[runs["algorithm"] != REFERENCE]
    shared = others[[key in ref for key in zip(others["task"], others["nodes"], others["data"])]]
    if shared.groupby(["task", "topology", "nodes", "algorithm", "compressor"])["data"].nunique().ge(2).any():
        return None
    return ("needs a method and all-reduce run on the same task, n and two or more data partitions "
            "(e.g. dirichlet:0.1 and shuffle)")


@needs
def speedup(grid: Grid) -> str | None:
    """A task that records the sub-optimality (lsq, logreg), run at n = 1 (the baseline) and at another n."""
    if grid.metrics is not None and "train_subopt" not in grid.metrics:
        return NO_SUBOPTIMALITY
    runs = usable(grid.cells)
    for _, g in runs.groupby("task"):
        if (g["nodes"] == 1).any() and g["nodes"].nunique() >= 2:
            return None
    return "needs runs at n = 1 (the baseline) and at another n of one task"


@needs
def sensitivity(grid: Grid) -> str | None:
    """A tuning grid of >= 2 learning rates or γ values that some cell searches."""
    for knob in SWEPT_KNOBS:
        if len(grid.tune_grid.get(knob, ())) >= 2 and any(knob in knobs for knobs in grid.tuned.values()):
            return None
    return "needs a tune: grid of >= 2 values of lr or gamma that some cell searches"


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


@needs
def faults_effect(grid: Grid) -> str | None:
    """A decentralized run that lost messages at a rate, or any run with an exponential straggler."""
    runs = _runs(grid)
    losses = lossy(runs) & (runs["algorithm"] != REFERENCE)
    return None if (losses | straggled(runs)).any() else NO_FAULTS


@needs
def consensus(grid: Grid) -> str | None:
    """A consensus: block with methods to run."""
    return None if grid.consensus.get("methods") else "needs a consensus: block with its methods"


# figure name -> what it needs (None: it can be drawn), for every figure of the catalog
REQUIRES: dict[str, Callable[[Grid], str | None]] = {name: _NEEDS.get(name, _trains) for name in FIGURES}


def unmet(figures: Sequence[str], grid: Grid) -> list[tuple[str, str]]:
    """(figure, why) for each of ``figures`` the grid cannot give, in the order asked."""
    return [(name, why) for name in figures if (why := REQUIRES[name](grid)) is not None]


def cells_frame(rows: Sequence[Mapping]) -> pd.DataFrame:
    """A cells frame from one mapping per cell (a run's resolved settings): CELL_COLUMNS, in that order, then
    FAULT_COLUMNS read from its ``faults`` setting as analysis.load reads them from a run."""
    return pd.DataFrame([{**{key: row.get(key) for key in CELL_COLUMNS}, **fault_columns(row.get("faults"))}
                         for row in rows], columns=CELL_COLUMNS + FAULT_COLUMNS)
