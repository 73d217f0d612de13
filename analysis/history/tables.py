"""Reading back the CSV tables `analysis history` writes (history.csv, steps.csv, newest.csv, noise.csv,
compare.csv). Their commit columns hold abbreviated hashes, which are text: a hash of decimal digits only
(one 12-character hash in about 280 is) would otherwise come back from `pd.read_csv` as an integer, losing
any leading zero and no longer equal to the hash. `read_output` keeps every such column as text."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

# the columns of the outputs that name commits, machines or samples: always text
TEXT_COLUMNS = ("quantity", "commit", "first_commit", "previous_commit", "describe", "point", "subject",
                "machine", "sample", "settings")


def read_output(path: str | Path) -> pd.DataFrame:
    """One of `analysis history`'s CSV tables, its commit (and other naming) columns as text."""
    header = pd.read_csv(path, nrows=0).columns
    return pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS if c in header}, keep_default_na=True)
