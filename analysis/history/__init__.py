"""`python -m analysis history DIR...`: the suite's speed and results over its commits, from the records of
`bench track` (DIR/<commit>/<time>.json of one machine, or a history root holding several machines).

Every number of a record is a tracked quantity: each `bench perf --quick` figure (its repeats) and each
study cell's final accuracy and epochs, bits and modelled seconds to the target (one value per seed),
compared only with numbers measured with the same settings (sizes, device, study, target accuracy).
Quantities are put in commit order (the repository's graph: git rev-list --topo-order of the measured
commits in --repo; committer dates, said on stderr, when no repository holds them), and for each:

* a figure against commit order (every repeat or seed a point, the median a line, detected steps marked);
* a change-point test: binary segmentation, each split of a segment with >= --min-side commits on either
  side tested by a two-sided Mann-Whitney U test of the values before against those after, the best split
  kept when its p-value times the number of splits tried (Bonferroni) is below --alpha, then each side
  searched again. A step is reported with its first commit, its size (between the medians of the segments
  around it) and both p-values; its verdict weighs the size against the quantity's tolerance;
* the newest commit against the commits since the last step (at most --window): a one-sided Mann-Whitney
  test in the worse direction and the tolerance. A regression there, beyond tolerance, makes the exit
  status 1 (when the values are too few for the test to reach --alpha, the tolerance alone decides).

The gate cannot pass on nothing (gate.py): failed runs, values missing or unusable at the newest commit are
exit status 1 too; a check that measured or compared nothing of --expect's commit is refused (exit 2).
Ratio figures and the study's numbers (modelled time) are pooled across machines; absolute times are
compared within one machine only (`NAME@<machine>` when several are read). Re-runs of a commit are repeats:
perf values are pooled, a seed's values are reduced to their median (the study is deterministic).
Writes OUT/history.csv, steps.csv, newest.csv, noise.csv, history.md and figures/<quantity>.png; read the
tables back with `read_output` (tables.py), which keeps their commit columns as text.
Exit 0, 1 when the newest commit starts a regression or failed, 2 on bad input (one line).

The package: records.py reads the records and builds the series, settings.py groups them by settings
(definitions.py by the version of a redefined quantity's definition, a series each),
order.py puts commits in order, changepoint.py holds the statistics, gate.py the refusals and failures,
figures.py draws, cli.py parses the arguments and writes the outputs (main); metric.py judges one
quantity at one commit for `bench bisect` (`python -m analysis.history.metric`)."""
from __future__ import annotations

from analysis.history.changepoint import (ALPHA, MIN_SIDE, WINDOW, _median, _noise_row, analyse, change,
                                          find_steps, mann_whitney, smallest_p, tolerance, verdict)
from analysis.history.cli import build_parser, main, run
from analysis.history.figures import draw
from analysis.history.gate import newest_failures
from analysis.history.order import graph_positions, order_points
from analysis.history.records import (KIND, KINDS, MACHINE_BOUND, STUDY_FIELDS, TOLERANCES, Skipped, load_records,
                                      observations, point_key, record_problem, series_of, settings_of)
from analysis.history.settings import split_by_settings
from analysis.history.tables import TEXT_COLUMNS, read_output

__all__ = ["ALPHA", "KIND", "KINDS", "MACHINE_BOUND", "MIN_SIDE", "STUDY_FIELDS", "TEXT_COLUMNS", "TOLERANCES",
           "WINDOW", "Skipped", "_median", "_noise_row", "analyse", "build_parser", "change", "draw", "find_steps",
           "graph_positions", "load_records", "main", "mann_whitney", "newest_failures", "observations",
           "order_points", "point_key", "read_output", "record_problem", "run", "series_of", "settings_of",
           "smallest_p", "split_by_settings", "tolerance", "verdict"]
