"""Summary of consensus traces: final error, and rounds and bits to reach an error level.

Reads the ``traces.csv`` files that ``bench consensus --out`` writes (one or several methods
each) and writes one table, as CSV and Markdown.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.checks import read_table
from analysis.errors import DamagedFile
from analysis.files import write_atomically, write_text_atomically
from analysis.report_html import names_as_text

# a traces.csv as `bench consensus --out` writes it: what this summary, the consensus figure and the claims read
TRACE_COLUMNS = ["method", "gamma", "topology", "nodes", "spectral_gap", "dim", "seed", "step", "rel_error",
                 "bits_per_worker"]


def read_trace(path: Path) -> pd.DataFrame:
    """One traces.csv, checked (checks.read_table): one of other columns or types raises DamagedFile, one
    that is not CSV at all what pandas raises (OSError, ValueError)."""
    return read_table(path, TRACE_COLUMNS, "bench consensus --out DIR", text=["method", "topology"],
                      filled=["method"], whole=["nodes", "dim", "seed", "step"],
                      numbers=["gamma", "spectral_gap", "rel_error", "bits_per_worker"])


def first_crossing(x: np.ndarray, err: np.ndarray, level: float) -> float:
    """First x at which ``err`` falls to ``level``, interpolated linearly in log(err) between
    recorded points; NaN-free: ``math.inf`` when the level is never reached."""
    x = np.asarray(x, dtype=float)
    err = np.asarray(err, dtype=float)
    below = np.flatnonzero(err <= level)
    if below.size == 0:
        return math.inf
    i = int(below[0])
    if i == 0:
        return float(x[0])
    e0, e1 = math.log(err[i - 1]), math.log(max(err[i], 1e-300))
    frac = (e0 - math.log(level)) / (e0 - e1)
    return float(x[i - 1] + frac * (x[i] - x[i - 1]))


def summarize(traces: pd.DataFrame, level: float = 1e-4) -> pd.DataFrame:
    rows = []
    for method, g in traces.groupby("method", sort=False):
        g = g.sort_values("step")
        last = g.iloc[-1]
        diverged = bool(last.get("diverged", False))
        reached = not diverged and last["rel_error"] <= level
        rounds = first_crossing(g["step"], g["rel_error"], level)
        mbits = first_crossing(g["bits_per_worker"] / 1e6, g["rel_error"], level)
        rows.append({
            "method": method,
            "gamma": float(last["gamma"]),
            "delta_measured": last.get("delta_measured"),
            "rounds": int(last["step"]),
            "final_rel_error": float(last["rel_error"]),
            "status": "diverged" if diverged else ("reached" if reached or math.isfinite(rounds) else "censored"),
            f"rounds_to_{level:g}": rounds,
            f"mbit_to_{level:g}": mbits,
            "mbit_per_round": float(last["bits_per_worker"]) / max(int(last["step"]), 1) / 1e6,
        })
    return pd.DataFrame(rows)


def table_markdown(table: pd.DataFrame) -> str:
    """summary.md's table (and the docs'): the summary as Markdown, names as text, 4 significant digits."""
    return names_as_text(table, ["method", "topology"]).to_markdown(index=False, floatfmt=".4g") + "\n"


def _read_or_say(path: Path) -> pd.DataFrame:
    try:
        return read_trace(path)
    except (OSError, ValueError) as err:  # not CSV at all
        raise DamagedFile(f"{path} is not a CSV table ({err}); write it again with `bench consensus --out DIR`") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis.consensus", description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", type=Path, help="traces.csv files from `bench consensus --out`")
    p.add_argument("--out", type=Path, required=True, help="directory for summary.csv and summary.md")
    p.add_argument("--level", type=float, default=1e-4, help="relative error level (default 1e-4)")
    args = p.parse_args(argv)
    missing = [str(t) for t in args.traces if not t.is_file()]
    if missing:
        print(f"error: no such traces file {missing[0]}", file=sys.stderr)
        return 2
    try:
        traces = pd.concat([_read_or_say(t) for t in args.traces], ignore_index=True)
    except DamagedFile as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    table = summarize(traces, args.level)
    write_atomically(args.out / "summary.csv", lambda tmp: table.to_csv(tmp, index=False))
    first = traces.iloc[0]
    header = (f"Consensus on {first['topology']} (n={first['nodes']}, spectral gap {first['spectral_gap']:.4f}), "
              f"d={first['dim']}, seed {first['seed']}; error relative to the start, level {args.level:g}.\n\n")
    write_text_atomically(args.out / "summary.md", header + table_markdown(table))
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
