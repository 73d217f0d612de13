"""What the analysis requires of the files it reads, each check saying why a file cannot be used (or None):
a run's run.json and metrics.parquet (such a run is skipped with the reason: analysis.load) and the tables
a command reads back, summary.csv and tuned.csv (one that cannot be used is one line, exit status 2)."""
from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import DamagedFile  # raised by read_table (analysis.tuning imports it from here)
from analysis.files import read_regular


# ---- run.json ----------------------------------------------------------------------------------------
# parts of run.json the tables read, and the JSON type each must have when present
_RECORD_OBJECTS = ("config", "topology", "compressor", "task", "gamma")
_RECORD_TEXT = ("run_id", "status", "bits_count")
_CONFIG_TEXT = ("task", "algorithm", "compressor", "topology", "data", "network", "weights")
_CONFIG_NUMBERS = ("lr", "epochs")
# text the tables take from the nested objects when the config lacks it
_NESTED_TEXT = {"topology": ("name", "weights"), "compressor": ("spec",), "task": ("name",)}
# what places a run in a cell: the config's value, else the one its description of that part gives
_IDENTITY = {"task": ("task", "name"), "algorithm": ("config", "algorithm"), "compressor": ("compressor", "spec"),
             "topology": ("topology", "name"), "nodes": ("topology", "n")}
# whole numbers and their range: what bench itself accepts (bench/limits.py, not imported: analysis reads
# files only), so a damaged run.json cannot overflow a table's int64 column
_WHOLE = {("config", "nodes"): (1, 4096), ("config", "seed"): (0, 2**31 - 1), ("topology", "n"): (1, 4096)}


def _whole_problem(where: str, value, low: int, high: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value):
        return f"run.json: {where} is {value!r:.40}, not an integer"
    if not low <= value <= high:
        return f"run.json: {where} is {value!r:.40}, outside {low}..{high}"
    return None


def record_problem(record) -> str | None:
    """Why a parsed run.json cannot be a row of the tables (a wrong type somewhere), or None."""
    if not isinstance(record, dict):
        return f"run.json holds a JSON {type(record).__name__}, not an object"
    if not isinstance(record.get("config"), dict):
        return "no 'config' object in run.json"
    for key in _RECORD_OBJECTS:
        if record.get(key) is not None and not isinstance(record[key], dict):
            return f"run.json: {key} is {record[key]!r:.40}, not an object"
    for key in _RECORD_TEXT:
        if key in record and not isinstance(record[key], str):
            return f"run.json: {key} is {record[key]!r:.40}, not a string"
    cfg = record["config"]
    for key in _CONFIG_TEXT:
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            return f"run.json: config.{key} is {cfg[key]!r:.40}, not a string"
    for key in _CONFIG_NUMBERS:
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"run.json: config.{key} is {value!r:.40}, not a number"
    for part, keys in _NESTED_TEXT.items():
        inner = record.get(part) or {}
        for key in keys:
            if inner.get(key) is not None and not isinstance(inner[key], str):
                return f"run.json: {part}.{key} is {inner[key]!r:.40}, not a string"
    for key, (part, inner_key) in _IDENTITY.items():  # as analysis.load reads them: the config's value first
        if (cfg[key] if key in cfg else (record.get(part) or {}).get(inner_key)) is None:
            where = f"config.{key}" + (f" or {part}.{inner_key}" if part != "config" else "")
            return f"run.json names no {key} ({where}), so the run is in no cell"
    for (part, key), (low, high) in _WHOLE.items():
        inner = record.get(part) or {}
        if key in inner:
            why = _whole_problem(f"{part}.{key}", inner[key], low, high)
            if why:
                return why
    return None


# ---- metrics.parquet ---------------------------------------------------------------------------------
# columns of metrics.parquet (Contract 2 and the task-specific ones) the analysis reads as numbers
METRIC_COLUMNS = ("step", "epoch", "train_loss", "train_loss_workers", "test_loss", "test_acc", "test_ppl",
                  "local_test_acc_mean", "consensus_distance", "bits_per_worker", "bits_per_worker_max",
                  "bits_paper_per_worker", "time_compute_s", "time_comm_s", "time_s", "wall_s", "lr",
                  "train_subopt", "val_acc", "val_loss", "val_ppl")
# what every run of every version of bench wrote and the tables cannot do without: the evaluation's place
# (step, epoch), the accuracy, and the two costs a target is reached at (modelled time, bits per worker)
REQUIRED_METRICS = ("step", "epoch", "test_acc", "time_s", "bits_per_worker")
# the axes every curve and crossing is read along: a NaN, inf or negative value has no place on them
AXES = ("step", "epoch")
# counted from zero up, as the axes, but a task may leave some unmeasured (NaN)
COSTS = ("bits_per_worker", "bits_per_worker_max", "bits_paper_per_worker", "time_compute_s", "time_comm_s",
         "time_s", "wall_s")
# never infinite (a loss, a perplexity or a distance may be, in a run that diverged)
BOUNDED = ("test_acc", "local_test_acc_mean", "val_acc", "lr")


def metrics_problem(metrics: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """``metrics`` with its known columns as numbers, or why it cannot be a run's evaluations: no rows,
    a required column missing, a known column of text, booleans or other non-numbers, an axis with a NaN,
    an axis or a cost below 0, or an infinite axis, cost or accuracy. The caller adds the run's status."""
    if metrics.empty:
        return metrics, "metrics.parquet has no evaluation points"
    missing = [c for c in REQUIRED_METRICS if c not in metrics]
    if missing:
        return metrics, (f"metrics.parquet lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"(every run has {', '.join(REQUIRED_METRICS)})")
    for column in (c for c in METRIC_COLUMNS if c in metrics):
        values = metrics[column]
        if values.isna().all():  # a metric this task never measures may be stored as nulls
            metrics[column] = values.astype(float)
        elif pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values) \
                or pd.api.types.is_complex_dtype(values):
            return metrics, f"metrics.parquet column {column!r} holds {values.dtype} values, not numbers"
    for column in (c for c in (*AXES, *COSTS, *BOUNDED) if c in metrics):
        values = metrics[column].astype(float)
        bad = values.isin([math.inf, -math.inf]) | (values < 0 if column not in BOUNDED else False)
        if column in AXES:
            bad |= values.isna()
        if bad.any():
            row = int(bad.to_numpy().argmax())
            allowed = "a finite number" if column in BOUNDED else "a finite number >= 0"
            return metrics, (f"metrics.parquet column {column!r} holds {values.iloc[row]:g} in row {row + 1}, "
                             f"not {allowed}")
    return metrics, None


# ---- tables read back ----------------------------------------------------------------------------------
def _shown(value) -> str:
    """A cell's value as a message shows it: ``nan``, ``'x'``, ``3``."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _is_text(values: pd.Series) -> bool:
    """Every value text or empty (a CSV column of numbers was never a name)."""
    return all(isinstance(v, str) for v in values.dropna())


def table_problem(table: pd.DataFrame, columns, *, text=(), filled=(), whole=(), numbers=(), flags=(),
                  choices=None) -> str | None:
    """Why ``table`` (as read from a CSV) is not the table ``columns`` names, or None: a column missing or
    twice, no rows, ``text`` columns holding numbers, ``filled`` ones empty somewhere, ``whole`` ones not
    whole numbers in every row, ``numbers`` ones holding other things than numbers (empty cells and inf
    are numbers), ``flags`` ones other than True/False, a column of ``choices`` (column -> allowed values)
    another value. A column named in the kinds but not in ``columns`` may be absent (an older table)."""
    missing = [c for c in columns if c not in table]
    if missing:
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        return f"lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing[:8])}{more}"
    if table.columns.duplicated().any():
        return f"has column {table.columns[table.columns.duplicated()][0]!r} twice"
    if table.empty:
        return "has no rows"

    def present(names):
        return [c for c in names if c in table]

    for column in present(text):
        if not _is_text(table[column]):
            return f"column {column!r} holds {_shown(table[column].dropna().iloc[0])}, not text"
    for column in present(filled):
        if table[column].isna().any():
            return f"column {column!r} is empty in row {int(table[column].isna().to_numpy().argmax()) + 1}"
    for column in present(whole):
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() | ~values.map(lambda v: math.isfinite(v) and v == int(v) and abs(v) < 2**53)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            return f"column {column!r} holds {_shown(table[column].iloc[row])} in row {row + 1}, not a whole number"
    for column in present(numbers):
        values = table[column]
        if pd.api.types.is_bool_dtype(values) or (not pd.api.types.is_numeric_dtype(values)
                                                  and values.notna().any()):
            odd = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
            return f"column {column!r} holds {_shown((odd if len(odd) else values).iloc[0])}, not a number"
    for column in present(flags):
        if not pd.api.types.is_bool_dtype(table[column]):
            odd = [v for v in table[column] if not isinstance(v, bool)]
            return f"column {column!r} holds {_shown(odd[0] if odd else table[column].iloc[0])}, not True or False"
    for column, allowed in (choices or {}).items():
        odd = [v for v in table[column].dropna() if v not in allowed] if column in table else []
        if odd:
            return f"column {column!r} holds {_shown(odd[0])}, not one of {', '.join(sorted(allowed))}"
    return None


def read_table(path: Path, columns, made_by: str, **kinds) -> pd.DataFrame:
    """The CSV at ``path`` when it is the table ``columns`` and ``kinds`` (table_problem) describe; one that
    is not raises DamagedFile naming the file, what is wrong and ``made_by`` (the command that writes it).
    A file that is not CSV at all raises what pandas raises (OSError, ValueError): the callers that can
    compute the table again do."""
    table = pd.read_csv(io.BytesIO(read_regular(path)))
    why = table_problem(table, columns, **kinds)
    if why:
        raise DamagedFile(f"{path} {why}: not a table this version can read; write it again with "
                          f"`{made_by}`, or remove it")
    for column in (c for c in kinds.get("whole", ()) if c in table):
        table[column] = pd.to_numeric(table[column]).astype("int64")
    return table
