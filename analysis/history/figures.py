"""The figures of `python -m analysis history`: one PNG per quantity against commit order, every repeat or
seed a point (a target never reached drawn as a triangle above the others), the median a line, detected
steps as dashed lines coloured by verdict and a regression of the newest commit circled."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.files import write_atomically
from analysis.history.changepoint import _median
from analysis.history.records import MACHINE_BOUND
from analysis.units import UNITS

# the units `bench track` records hold (records.STUDY_FIELDS and bench perf's figures) -> (the kind of quantity whose
# unit the figures show, the words that name it there): raw bits and fractions read as nothing else in the suite does
_RECORDED = {"test accuracy": ("accuracy", "test accuracy (%)"),
             "bits sent per worker": ("bits", "Mbit sent per worker"), "modelled s": ("modelled_time", "modelled s")}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=_+-]", "_", name)


def shown_unit(unit: str) -> tuple[str, float]:
    """(the words of its axis, the factor from the recorded value) of a quantity recorded in ``unit``: units.UNITS's
    unit of its kind (a time measured in s, per step or round: ms); any other unit as recorded."""
    unit = str(unit)
    if unit in _RECORDED:
        kind, words = _RECORDED[unit]
        return words, UNITS[kind][1]
    if unit == "s" or unit.startswith("s/"):
        shown, factor = UNITS["measured_time"]
        return shown + unit[1:], factor
    return unit, 1.0


def draw(quantity: str, s: dict, steps: pd.DataFrame, newest: dict | None, labels: dict[str, str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unit, factor = shown_unit(s["unit"])
    s = {**s, "values": [np.asarray(v, float) * factor for v in s["values"]]}
    n = len(s["points"])
    fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * n + 2.5), 3.4))
    finite = np.concatenate([v[np.isfinite(v)] for v in s["values"]] or [np.array([])])
    top = float(finite.max()) if finite.size else 1.0
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, values in enumerate(s["values"]):
        k = len(values)
        offsets = np.linspace(-0.15, 0.15, k) if k > 1 else np.zeros(1)
        fin = np.isfinite(values)
        ax.scatter(i + offsets[fin], values[fin], s=14, alpha=0.65, color=colors[0], linewidths=0, zorder=3)
        if (~fin).any():  # a target not reached: drawn above the others
            ax.scatter(i + offsets[~fin], np.full((~fin).sum(), top * 1.08), marker="^", s=22, color="0.4", zorder=3)
    medians = [_median(v[np.isfinite(v)]) if np.isfinite(v).any() else math.nan for v in s["values"]]
    ax.plot(range(n), medians, "-", color=colors[0], lw=1.4, zorder=2, label="median")
    for _, step in steps[steps["quantity"] == quantity].iterrows():
        k = s["points"].index(step["first_commit"])
        color = {"regression": "tab:red", "improvement": "tab:green"}.get(step["verdict"], "0.5")
        ax.axvline(k - 0.5, ls="--", color=color, lw=1.2,
                   label=f"step {step['change']:+.1%} (p={step['p_adj']:.2g}, {step['verdict']})"
                   if step["mode"] == "rel" else
                   f"step {step['change'] * factor:+.3g} (p={step['p_adj']:.2g}, {step['verdict']})")
    if newest and newest.get("verdict") == "regression":
        ax.scatter([n - 1], [medians[-1]], s=90, facecolors="none", edgecolors="tab:red", lw=1.8, zorder=4,
                   label="newest commit: regression")
    ax.set_xticks(range(n))
    # names and labels come from records: text, never mathtext ("$\\foo{$" had ended in a traceback)
    ax.set_xticklabels([labels.get(p, p[:7]) for p in s["points"]], rotation=60, ha="right", fontsize=7,
                       parse_math=False)
    ax.set_xlim(-0.6, n - 0.4)
    mode, tol = s["tolerance"]
    tol_text = f"{tol:.0%}" if mode == "rel" else f"{tol * factor:g}" + " points" * unit.endswith("(%)")
    better = "higher" if s["higher_is_better"] else "lower"
    where = f"; {', '.join(s['machines'])}" if s["kind"] not in MACHINE_BOUND and len(s["machines"]) > 1 else ""
    ax.set_title(f"{quantity}\n{s['kind']}, {better} is better, tolerance {tol_text}{where}", fontsize=8.5,
                 parse_math=False)
    ax.set_ylabel(unit, fontsize=8, parse_math=False)
    ax.ticklabel_format(axis="y", useOffset=False)  # values as they read, never "+1.16e8" above the axis
    ax.set_xlabel("commit (oldest to newest)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=6.5, loc="best", frameon=False)
    fig.tight_layout()
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    plt.close(fig)
    return path
