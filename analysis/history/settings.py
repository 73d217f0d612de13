"""Settings groups of `python -m analysis history`: a record's numbers are compared only with numbers measured
with the same settings (records.settings_of: bench perf's sizes and device; the study, and for the
*_to_target numbers its target accuracy). A quantity measured with several settings becomes one series per
group, its name followed by what differs, e.g. ``study.c.epochs_to_target[target 0.6]``; records that do not
store a setting form a group of their own ("settings not recorded"), said once on stderr (settings_note)."""
from __future__ import annotations

import json

import pandas as pd

NOT_RECORDED = "settings not recorded"


def _value(v) -> str:
    if v is None:
        return "not recorded"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _labels(keys) -> dict[str, str]:
    """Each settings key of one quantity -> the words that tell it from the others."""
    parsed = {k: dict(json.loads(k)) for k in keys}
    fields = [f for f, _ in json.loads(keys[0])]
    differ = [f for f in fields if len({json.dumps(p.get(f)) for p in parsed.values()}) > 1]
    return {k: NOT_RECORDED if all(v is None for v in p.values())
            else ", ".join(f"{f} {_value(p.get(f))}" for f in differ) for k, p in parsed.items()}


def split_by_settings(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each quantity measured with several settings split into one quantity per group."""
    groups = table.groupby("name")["settings"].unique()
    mixed = groups[groups.map(len) > 1]
    if mixed.empty:
        return table
    labels = {(name, key): label for name, keys in mixed.items() for key, label in _labels(list(keys)).items()}
    table = table.copy()
    rows = table["name"].isin(mixed.index)
    table.loc[rows, "quantity"] = [f"{name}[{labels[(name, key)]}]" for name, key in
                                   zip(table.loc[rows, "name"], table.loc[rows, "settings"])]
    return table


def settings_note(table: pd.DataFrame) -> list[str]:
    """The one note that says which quantities of ``table`` (split_by_settings') are split, if any."""
    split = table[table["quantity"] != table["name"]]
    if split.empty:
        return []
    example = sorted(split.loc[split["name"] == split["name"].iloc[0], "quantity"].unique())
    note = (f"analysis history: note: {split['name'].nunique()} quantities were measured with different settings, "
            f"each group a series of its own (e.g. {' and '.join(example[:2])})")
    unknown = split.loc[split["quantity"].str.endswith(f"[{NOT_RECORDED}]"), "record"].nunique()
    if unknown:
        note += (f"; {unknown} records do not store their settings (older bench track): they are the group "
                 f"'{NOT_RECORDED}'")
    return [note]
