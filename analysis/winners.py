"""The tuning study's winners beside their final runs: per cell, the values selected on the validation split, their
validation score on the full schedule, and the final test accuracy of the cell's runs, of the averaged model and of
the local models (the paper's metric). docs/results.md's tuning table (`python -m analysis docs`)."""
from __future__ import annotations

import pandas as pd

from analysis.display import as_percent
from analysis.labels import method_label, method_sort_key
from analysis.report_html import md_text
from analysis.tables import AVERAGED, LOCAL, accuracy_text
from analysis.tuning import knob_columns

SHORT = {"lr": "lr", "weight_decay": "wd", "gamma": "γ"}  # a knob's name in the table (others: their own)
MATCH = ["task", "algorithm", "compressor", "topology", "nodes"]  # a cell's trials and its final runs share these


def _final(runs: pd.DataFrame, value: str) -> str:
    """Mean ± std over the final runs' seeds of ``value`` (a fraction) in %, as every generated table gives it."""
    return accuracy_text(runs.assign(acc=as_percent(runs[value]))) if value in runs else "—"


def _row(g: pd.DataFrame, summary: pd.DataFrame) -> tuple[str, str]:
    """(method, the table's row) of one cell's trials (``g``: tuned.csv's rows, all or those on the slices)."""
    best = g[g["selected"].astype(bool)]
    first = best.iloc[0]
    method = method_label(first["algorithm"], str(first["compressor"]))
    knobs = [k for k in knob_columns(g) if g[k].nunique(dropna=True) > 1]
    chosen = ", ".join(f"{SHORT.get(k, k)} {first[k]:g}" for k in knobs)
    score = best[first["criterion"]].mean()
    shown = f"{100 * score:.1f}" if first["criterion"] == "val_acc" else f"{score:.4g}"
    same = pd.Series(True, index=summary.index)
    for column in MATCH:
        same &= summary[column].astype(str) == str(first[column])
    runs = summary[same]
    return method, (f"| {md_text(method)} | {chosen} | {shown} | {len(runs)} | {_final(runs, AVERAGED)} | "
                    f"{_final(runs, LOCAL)} |")


def winners_markdown(trials: pd.DataFrame, summary: pd.DataFrame) -> str:
    """``trials``: tuned.csv's rows (all, or those figures.sensitivity.drawn keeps); ``summary``: the study's
    summary.csv. A row per cell with a selected point, in legend order."""
    chosen = trials[trials.groupby("cell")["selected"].transform(lambda s: s.astype(bool).any())]
    rows = sorted((_row(g, summary) for _, g in chosen.groupby("cell")), key=lambda r: method_sort_key(r[0]))
    criterion = {"val_acc": "val. acc. %"}.get(str(chosen["criterion"].dropna().iloc[0]), "val. score")
    return (f"| method | selected | {criterion} ({chosen['epochs'].max():g} epochs) | seeds | final test acc. %, "
            "averaged model | local models |\n|---|---|---|---|---|---|\n" + "\n".join(r for _, r in rows) + "\n")
