"""What the claims read: a study's per-run summary and consensus traces, with the questions every claim
asks of them. Which runs are a cell's, which seeds pair with the reference's, which metric a set of runs
supports, and, when something is missing, a line that says exactly what.

Only finished runs are evidence: a completed or diverged run (divergence is a result). A failed, paused or
unfinished run is reported as missing, with its status.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.claims.base import LEVEL, MIN_SEEDS
from analysis.selection import REFERENCE

USABLE = ("completed", "diverged")
SETTING = ["task", "topology", "nodes", "data", "network"]
REFERENCE_KEYS = ["task", "nodes", "data", "network"]  # all-reduce's result does not depend on the graph
LOCAL, AVERAGED = "final_local_acc", "final_test_acc"
METRIC_WORDS = {
    LOCAL: "final accuracy of the local models, mean over all n workers (every worker scored)",
    AVERAGED: "final accuracy of the averaged model x̄ (not every run scored all n local models)",
}


def spec_head(spec) -> str:
    """A compressor spec without its options: ``qsgd:2,biased=true`` → ``qsgd:2``."""
    return str(spec).split(",")[0]


class Evidence:
    def __init__(self, summary: pd.DataFrame | None, traces: pd.DataFrame | None = None,
                 min_seeds: int = MIN_SEEDS):
        data = summary.copy() if summary is not None else pd.DataFrame()
        if len(data):
            if "status" not in data:
                data["status"] = "completed"
            data["comp"] = data["compressor"].map(spec_head) if "compressor" in data else "none"
            if "seed" not in data:
                data["seed"] = 0
        self.everything = data  # with failed and unfinished runs, to say why a seed is missing
        self.summary = data[data["status"].isin(USABLE)] if len(data) else data
        self.traces = traces
        if int(min_seeds) < 2:  # one seed has no interval: a comparison over it would decide on noise
            raise ValueError(f"claims need at least 2 seeds per cell; got min_seeds={min_seeds}")
        self.min_seeds = int(min_seeds)
        self.level = LEVEL

    # -- cells -------------------------------------------------------------------------------------------
    def _select(self, frame: pd.DataFrame, algorithm: str | None, compressor: str | None, where: dict):
        if frame.empty:
            return frame
        mask = pd.Series(True, index=frame.index)
        if algorithm is not None:
            mask &= frame["algorithm"] == algorithm
        if compressor is not None:
            mask &= frame["comp"] == compressor
        for key, value in where.items():
            if key in frame:
                mask &= frame[key] == value
        return frame[mask]

    def runs(self, algorithm: str | None = None, compressor: str | None = None, **where) -> pd.DataFrame:
        return self._select(self.summary, algorithm, compressor, where)

    def reference(self, setting: dict) -> pd.DataFrame:
        return self.runs(REFERENCE, **{k: setting[k] for k in REFERENCE_KEYS if k in setting})

    def table1_setting(self) -> dict | None:
        """The (task, topology, nodes, data, network) with the most compressed DCD/ECD/Choco runs where
        all-reduce ran too: the study's stand-in for Table 1."""
        s = self.summary
        if s.empty or not set(SETTING) <= set(s):
            return None
        compressed = s[s["algorithm"].isin(["choco", "dcd", "ecd"]) & (s["comp"] != "none")]
        reference = s[s["algorithm"] == REFERENCE][REFERENCE_KEYS].drop_duplicates()
        joined = compressed.merge(reference, on=REFERENCE_KEYS) if len(compressed) and len(reference) else compressed
        if joined.empty:
            return None
        return dict(zip(SETTING, joined.groupby(SETTING).size().idxmax()))

    # -- seeds ---------------------------------------------------------------------------------------------
    @staticmethod
    def seeds(runs: pd.DataFrame) -> set[int]:
        return set(int(s) for s in runs["seed"]) if len(runs) else set()

    def _not_finished(self, algorithm, compressor, where) -> str:
        rest = self._select(self.everything, algorithm, compressor, where)
        rest = rest[~rest["status"].isin(USABLE)] if len(rest) else rest
        if rest.empty:
            return ""
        counts = rest["status"].value_counts()
        return " (" + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + ")"

    def shortfall(self, label: str, runs: pd.DataFrame, paired_with: set[int] | None = None,
                  algorithm=None, compressor=None, where=None) -> str | None:
        """None when ``runs`` has ``min_seeds`` seeds (those in ``paired_with``, when given), else the line
        that says what is missing."""
        have = self.seeds(runs)
        if paired_with is not None:
            have &= paired_with
        if len(have) >= self.min_seeds:
            return None
        why = self._not_finished(algorithm, compressor, where or {}) if algorithm is not None else ""
        if not len(runs):
            return f"{label}: no finished runs{why}"
        which = ", ".join(str(s) for s in sorted(have)) or "none"
        paired = " paired with the reference" if paired_with is not None else ""
        return f"{label}: {len(have)} of {self.min_seeds} seeds{paired} (seeds {which}){why}"

    # -- metric ------------------------------------------------------------------------------------------
    @staticmethod
    def metric(*frames: pd.DataFrame) -> str:
        """The local-model metric where every finished, non-diverged run scored all n workers at its
        final evaluation (``final_local_acc`` is NaN otherwise), else the averaged model's."""
        alive = [f[f["status"] != "diverged"] for f in frames if len(f)]
        if alive and all(LOCAL in f for f in alive) and all(
                pd.to_numeric(f[LOCAL], errors="coerce").notna().all() for f in alive):
            return LOCAL
        return AVERAGED

    @staticmethod
    def accuracy(runs: pd.DataFrame, metric: str) -> dict[int, float]:
        """seed → accuracy in points; NaN for a diverged run."""
        out = {}
        for _, row in runs.iterrows():
            value = pd.to_numeric(row.get(metric), errors="coerce")
            out[int(row["seed"])] = math.nan if row["status"] == "diverged" or pd.isna(value) else 100 * float(value)
        return out


def seed_list(seeds) -> str:
    return ", ".join(str(s) for s in sorted(seeds))


def finite(values) -> np.ndarray:
    v = np.asarray(list(values), dtype=float)
    return v[np.isfinite(v)]
