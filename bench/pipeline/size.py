"""How many runs a study spells out, counted from its grid before anything is expanded: a study too large to
build its DAG in about a minute is warned about with its size, one far larger is refused unless it says
``allow_large: true`` (the time and memory grow with the runs: 10^5 runs took 6 min 39 s and 2.35 GB)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import BenchError

SECONDS_PER_RUN = 0.004  # DAG build of `snakemake -n`, per run (2,000 runs: 10 s; 10^5: 6 min 39 s)
BYTES_PER_RUN = 24_000  # its memory, per run
WARN_RUNS = 15_000  # about a minute
MAX_RUNS = 200_000  # about 13 minutes and 5 GB


@dataclass(frozen=True)
class Size:
    cells: int  # at most: blocks that ask for the same training share a cell
    runs: int  # final runs: cells x seeds
    trials: int  # tuning trials, at most: cells x the grid points their block does not fix x tuning seeds

    @property
    def total(self) -> int:
        return self.runs + self.trials

    def described(self) -> str:
        seconds, gigabytes = self.total * SECONDS_PER_RUN, self.total * BYTES_PER_RUN / 1e9
        took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
        return (f"{self.total:,} runs ({self.cells:,} cells x seeds = {self.runs:,} final runs, {self.trials:,} "
                f"tuning trials): its DAG takes about {took} and {gigabytes:.1f} GB to build")


def _count(values: Any) -> int:
    return len(values) if isinstance(values, list) else 1


def count(sized: dict[str, Any]) -> Size:
    """The size of a study's config at its scale (bench/pipeline/scale.py ``sized``), from its lists alone."""
    seeds = _count(sized.get("seeds", [0]))
    tune = sized.get("tune") if isinstance(sized.get("tune"), dict) else {}
    grid = tune.get("grid") or {}
    tune_seeds = _count(tune.get("seeds", [0]))
    cells = trials = 0
    for block in (sized.get("blocks") or {}).values():
        if not isinstance(block, dict):
            continue
        n = math.prod(_count(v) for v in block.values())
        cells += n
        if grid:
            trials += n * math.prod(_count(v) for k, v in grid.items() if k not in block) * tune_seeds
    return Size(cells, cells * seeds, trials)


def allows_large(config: dict[str, Any]) -> bool:
    return str(config.get("allow_large", False)).lower() == "true"


def check(size: Size, allow_large: bool) -> str | None:
    """Refuse a study of more than MAX_RUNS runs unless ``allow_large``; the warning line for one of more
    than WARN_RUNS (None below)."""
    if size.total > MAX_RUNS and not allow_large:
        raise BenchError(f"{size.described()}; at most {MAX_RUNS:,} are built without `allow_large: true` "
                         "(split the study, or set it to build this one)")
    if size.total > WARN_RUNS:
        return f"{size.described()} (more than {WARN_RUNS:,} runs: over a minute)"
    return None
