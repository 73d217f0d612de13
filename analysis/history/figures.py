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


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=_+-]", "_", name)


def draw(quantity: str, s: dict, steps: pd.DataFrame, newest: dict | None, labels: dict[str, str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
                   f"step {step['change']:+.3g} (p={step['p_adj']:.2g}, {step['verdict']})")
    if newest and newest.get("verdict") == "regression":
        ax.scatter([n - 1], [medians[-1]], s=90, facecolors="none", edgecolors="tab:red", lw=1.8, zorder=4,
                   label="newest commit: regression")
    ax.set_xticks(range(n))
    # names and labels come from records: text, never mathtext ("$\\foo{$" had ended in a traceback)
    ax.set_xticklabels([labels.get(p, p[:7]) for p in s["points"]], rotation=60, ha="right", fontsize=7,
                       parse_math=False)
    ax.set_xlim(-0.6, n - 0.4)
    mode, tol = s["tolerance"]
    tol_text = f"{tol:.0%}" if mode == "rel" else f"{tol:g}"
    better = "higher" if s["higher_is_better"] else "lower"
    where = f"; {', '.join(s['machines'])}" if s["kind"] not in MACHINE_BOUND and len(s["machines"]) > 1 else ""
    ax.set_title(f"{quantity}\n{s['kind']}, {better} is better, tolerance {tol_text}{where}", fontsize=8.5,
                 parse_math=False)
    ax.set_ylabel(s["unit"], fontsize=8, parse_math=False)
    ax.set_xlabel("commit (oldest to newest)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=6.5, loc="best", frameon=False)
    fig.tight_layout()
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    plt.close(fig)
    return path
