"""The paper's qualitative claims as checks over a study's results.

Each claim is written once, with its threshold: a function of the per-run summary (and, for
Choco-Gossip, the consensus traces) that answers ``holds``, ``fails`` or ``not run`` (the study has
no runs that could test it) with what it measured. Accuracies are the paper's metric, the local
models averaged over workers (``final_local_acc``), where the runs scored every worker, else the
averaged model's, and the table says which.

``python -m analysis claims DIR``: the table ``claim · expected · measured · verdict`` on stdout and in
``DIR/claims.csv``; the report has it as a section, and ``regress`` counts a claim that held in the
baseline and fails now as a regression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from analysis.labels import bits_counts, bits_short

HOLDS, FAILS, NOT_RUN = "holds", "fails", "not run"
# a method "fails" where the paper has it diverge or collapse: diverged, or this far below all-reduce (points)
COLLAPSE = 10.0
# Choco-SGD "matches" all-reduce in Table 1 (worst gap there: 1.3 points at random 1 %)
MARGIN = 2.0
# Table 3: sign-Choco sends 1/32 of exact gossip's bits per iteration; at matched accuracy we ask at least this saving
BITS_SAVING = 10.0
DCD_FAILS = ("qsgd:4", "qsgd:2", "rand:0.1", "rand:0.01")
LOW_BITS = 8  # ECD fails for QSGD at this many bits and fewer


@dataclass(frozen=True)
class Verdict:
    verdict: str
    measured: str


@dataclass(frozen=True)
class Claim:
    name: str
    expected: str
    check: Callable[["Evidence"], Verdict]


CLAIMS: list[Claim] = []


def claim(name: str, expected: str):
    def register(check):
        CLAIMS.append(Claim(name, expected, check))
        return check
    return register


class Evidence:
    """What the checks read: the study's per-run summary (usable runs) and its consensus traces."""

    def __init__(self, summary: pd.DataFrame | None, traces: pd.DataFrame | None = None):
        data = summary if summary is not None else pd.DataFrame()
        if "status" in data:
            data = data[~data["status"].isin(["failed", "running", "interrupted", "paused"])]
        self.summary = data.copy()
        alive = data[data["status"] != "diverged"] if "status" in data else data
        local = "final_local_acc" in data and pd.to_numeric(alive["final_local_acc"], errors="coerce").notna().all()
        self.metric = "final_local_acc" if local and len(data) else "final_test_acc"
        if len(data):
            self.summary["acc"] = 100 * pd.to_numeric(data[self.metric], errors="coerce")
            self.summary["compressor"] = self.summary["compressor"].astype(str).str.split(",").str[0]
        self.traces = traces

    def cell(self, algorithm: str, compressor: str | None = None, **where) -> pd.DataFrame:
        s = self.summary
        if s.empty:
            return s
        mask = s["algorithm"] == algorithm
        if compressor is not None:
            mask &= s["compressor"] == compressor
        for key, value in where.items():
            mask &= s[key] == value
        return s[mask]

    def table1_setting(self) -> dict | None:
        """(task, topology, nodes, data, network) with the most compressed runs, where all-reduce ran too."""
        s = self.summary
        if s.empty:
            return None
        keys = ["task", "topology", "nodes", "data", "network"]
        compressed = s[s["algorithm"].isin(["choco", "dcd", "ecd"]) & (s["compressor"] != "none")]
        reference = s[s["algorithm"] == "allreduce"][["task", "nodes", "data", "network"]].drop_duplicates()
        if compressed.empty or reference.empty:
            return None
        joined = compressed.merge(reference, on=["task", "nodes", "data", "network"])
        if joined.empty:
            return None
        return dict(zip(keys, joined.groupby(keys).size().idxmax()))

    def allreduce(self, setting: dict) -> pd.DataFrame:
        s = self.summary
        return s[(s["algorithm"] == "allreduce") & (s["task"] == setting["task"]) & (s["nodes"] == setting["nodes"])
                 & (s["data"] == setting["data"]) & (s["network"] == setting["network"])]


def _mean_sd(acc: pd.Series) -> str:
    acc = acc.dropna()
    return f"{acc.mean():.2f} ± {acc.std(ddof=1):.2f}" if len(acc) > 1 else (f"{acc.mean():.2f}" if len(acc) else "—")


def _failed(runs: pd.DataFrame, reference: float) -> tuple[bool, str]:
    """Whether a cell failed as the paper means it: every seed diverged, or the mean is COLLAPSE points
    below all-reduce."""
    diverged = int((runs["status"] == "diverged").sum())
    alive = runs.loc[runs["status"] != "diverged", "acc"].dropna()
    if diverged == len(runs):
        return True, "diverged"
    mean = alive.mean()
    text = f"{mean:.1f}" + (f" ({diverged} of {len(runs)} diverged)" if diverged else "")
    return bool(reference - mean >= COLLAPSE or diverged > len(runs) / 2), text


@claim("choco-matches-allreduce",
       f"Choco-SGD with every compressor is within {MARGIN:g} points of all-reduce (Table 1)")
def _choco_matches(ev: Evidence) -> Verdict:
    setting = ev.table1_setting()
    if setting is None:
        return Verdict(NOT_RUN, "no Choco and all-reduce runs at one setting")
    ref = ev.allreduce(setting)["acc"].mean()
    choco = ev.cell("choco", **setting)
    choco = choco[choco["compressor"] != "none"]
    if choco.empty:
        return Verdict(NOT_RUN, "no compressed Choco runs")
    gaps = {c: ref - g.loc[g["status"] != "diverged", "acc"].mean() if (g["status"] != "diverged").any() else math.inf
            for c, g in choco.groupby("compressor")}
    worst = max(gaps, key=gaps.get)
    seeds = int(choco.groupby("compressor").size().min())
    text = (f"all-reduce {ref:.2f}; worst gap {gaps[worst]:.2f} points ({worst}) over {len(gaps)} compressors, "
            f"≥ {seeds} seed(s) each")
    return Verdict(HOLDS if gaps[worst] <= MARGIN else FAILS, text)


def _fails_for(ev: Evidence, algorithm: str, wanted: Callable[[str], bool], what: str) -> Verdict:
    setting = ev.table1_setting()
    if setting is None:
        return Verdict(NOT_RUN, "no runs at a setting with all-reduce")
    ref = ev.allreduce(setting)["acc"].mean()
    cells = ev.cell(algorithm, **setting)
    cells = cells[cells["compressor"].map(wanted)]
    if cells.empty:
        return Verdict(NOT_RUN, f"no {algorithm} runs with {what}")
    results = {c: _failed(g, ref) for c, g in cells.groupby("compressor")}
    survivors = [c for c, (failed, _) in results.items() if not failed]
    text = "; ".join(f"{c}: {t}" for c, (_, t) in sorted(results.items())) + f" (all-reduce {ref:.1f})"
    return Verdict(FAILS if survivors else HOLDS, text)


@claim("dcd-fails-at-low-precision",
       f"DCD-PSGD diverges or falls ≥ {COLLAPSE:g} points below all-reduce at QSGD 4/2-bit and random 10 %/1 %")
def _dcd_fails(ev: Evidence) -> Verdict:
    return _fails_for(ev, "dcd", lambda c: c in DCD_FAILS, "QSGD 4/2-bit or random 10 %/1 %")


def _bits(spec: str) -> float:
    try:
        return float(spec.split(":", 1)[1]) if spec.startswith("qsgd:") else math.inf
    except ValueError:
        return math.inf


@claim("ecd-fails", f"ECD-PSGD diverges or falls ≥ {COLLAPSE:g} points below all-reduce with every sparsifier "
                    f"and with QSGD of {LOW_BITS} bits or fewer")
def _ecd_fails(ev: Evidence) -> Verdict:
    return _fails_for(ev, "ecd", lambda c: c.startswith(("top:", "rand:")) or _bits(c) <= LOW_BITS,
                      f"a sparsifier or QSGD ≤ {LOW_BITS} bits")


def _rate(trace: pd.DataFrame, floor: float = 1e-10) -> tuple[float, float]:
    """(rate per round, R²) of a straight-line fit of log error against rounds, over the steady descent:
    from the first error below 0.1 (past the first rounds' transient) to the end, or, when the trace
    levels off (its last fifth falls by less than a tenth of an average fifth: an operator's own floor,
    such as sign's near 1e-6 at a large γ, or float precision), to where it first comes within 10× of
    its lowest value."""
    t = trace[trace["step"] > 0].sort_values("step")
    err = t["rel_error"].to_numpy(float)
    if len(err) and np.isfinite(err).all():
        tail = err[int(0.8 * len(err)):]
        # levelled off: the last fifth fell by less than a tenth of what an average fifth did
        drop = math.log(err[0] / err[-1]) if err[0] > 0 and err[-1] > 0 else 0.0
        plateau = len(tail) > 1 and tail[-1] > 0 and math.log(tail[0] / tail[-1]) < 0.1 * drop / 5
        end = int(np.argmax(err <= 10 * max(err.min(), floor))) if plateau else len(err) - 1
        start = int(np.argmax(err <= 0.1)) if (err <= 0.1).any() else 0
        t = t.iloc[min(start, end): end + 1]
    t = t[t["rel_error"] > floor]
    if len(t) < 3:
        return math.nan, math.nan
    fit = stats.linregress(t["step"], np.log(t["rel_error"]))
    return -fit.slope, fit.rvalue ** 2


@claim("choco-gossip-linear", "Choco-Gossip converges linearly for every compressor (log error falls on a line "
                              "from 0.1 to its floor, R² ≥ 0.9), and more slowly the smaller δ (Spearman > 0)")
def _gossip_linear(ev: Evidence) -> Verdict:
    traces = ev.traces
    if traces is None or traces.empty:
        return Verdict(NOT_RUN, "no consensus traces")
    compressed = traces[traces["method"] != "exact"]
    rows = []
    for method, g in compressed.groupby("method"):
        rate, r2 = _rate(g)
        rows.append((method, rate, r2, float(pd.to_numeric(g["delta_measured"], errors="coerce").iloc[0])))
    if not rows:
        return Verdict(NOT_RUN, "no compressed consensus runs")
    linear = all(rate > 0 and r2 >= 0.9 for _, rate, r2, _ in rows)
    text = "; ".join(f"{m}: rate {r:.3g}/round, R² {q:.3f}, δ {d:.3g}" for m, r, q, d in rows)
    ordered = True
    if len(rows) >= 3:
        rho = stats.spearmanr([d for *_, d in rows], [r for _, r, _, _ in rows]).statistic
        ordered = bool(rho > 0)
        text += f"; Spearman(δ, rate) = {rho:.2f}"
    return Verdict(HOLDS if linear and ordered else FAILS, text)


@claim("gap-grows-as-spectral-gap-shrinks",
       "the gap to all-reduce grows as the spectral gap shrinks; at the largest n the torus is ahead of the ring")
def _gap_and_graph(ev: Evidence) -> Verdict:
    s = ev.summary
    if s.empty or "final_gap" not in s or "spectral_gap" not in s:
        return Verdict(NOT_RUN, "no summary with gaps to all-reduce")
    choco = s[(s["algorithm"] == "choco") & pd.to_numeric(s["final_gap"], errors="coerce").notna()]
    if "data" in choco and choco["data"].nunique() > 1:  # one partition: i.i.d. (shuffle) when the study has it
        schemes = choco["data"].value_counts()
        choco = choco[choco["data"] == ("shuffle" if "shuffle" in schemes.index else schemes.index[0])]
    cells = choco.groupby(["topology", "nodes"]).agg(gap=("final_gap", "mean"), rho=("spectral_gap", "first"))
    if len(cells) < 3:
        return Verdict(NOT_RUN, "fewer than 3 Choco cells with a gap to all-reduce")
    rho = stats.spearmanr(cells["rho"], cells["gap"]).statistic
    text = f"Spearman(spectral gap, gap to all-reduce) = {rho:.2f} over {len(cells)} (topology, n) cells"
    grows = bool(rho < 0)
    big = int(choco["nodes"].max())
    at_big = choco[choco["nodes"] == big].groupby("topology")["acc"].mean()
    torus_first = True
    if {"ring", "torus"} <= set(at_big.index):
        torus_first = bool(at_big["torus"] > at_big["ring"])
        text += f"; n = {big}: torus {at_big['torus']:.2f}, ring {at_big['ring']:.2f}"
    return Verdict(HOLDS if grows and torus_first else FAILS, text)


@claim("sign-choco-saves-bits", f"sign-Choco reaches the accuracy target with ≥ {BITS_SAVING:g}× fewer bits than "
                                "exact decentralized SGD (Table 3)")
def _bits_saving(ev: Evidence) -> Verdict:
    s = ev.summary
    if s.empty or "bits_to_target" not in s:
        return Verdict(NOT_RUN, "no time-to-accuracy summary")
    keys = ["task", "topology", "nodes", "data", "network"]
    sign = s[(s["algorithm"] == "choco") & (s["compressor"] == "sign")]
    exact = s[s["algorithm"] == "dpsgd"]
    pairs = sign.merge(exact, on=keys + ["seed"], suffixes=("_sign", "_exact"))
    if pairs.empty:
        return Verdict(NOT_RUN, "no sign-Choco and D-PSGD runs at one setting")
    sign_bits = pd.to_numeric(pairs["bits_to_target_sign"], errors="coerce")
    exact_bits = pd.to_numeric(pairs["bits_to_target_exact"], errors="coerce")
    both = np.isfinite(sign_bits) & np.isfinite(exact_bits)
    if not both.any():
        reached = int(np.isfinite(sign_bits).sum())
        return Verdict(FAILS if reached < len(pairs) else NOT_RUN,
                       f"sign-Choco reached the target in {reached} of {len(pairs)} runs; D-PSGD in "
                       f"{int(np.isfinite(exact_bits).sum())}")
    saving = float(np.median(exact_bits[both] / sign_bits[both]))
    text = (f"median saving {saving:.1f}× over {int(both.sum())} paired runs "
            f"({np.median(sign_bits[both]) / 1e6:.3g} vs {np.median(exact_bits[both]) / 1e6:.3g} Mbit "
            f"{bits_short(bits_counts(pairs.rename(columns={'bits_count_sign': 'bits_count'})))})")
    return Verdict(HOLDS if saving >= BITS_SAVING else FAILS, text)


def read_traces(run_dir: Path) -> pd.DataFrame | None:
    files = sorted((Path(run_dir) / "consensus").glob("*/traces.csv"))
    frames = []
    for f in files:
        try:
            frames.append(pd.read_csv(f))
        except (OSError, ValueError):
            continue
    return pd.concat(frames, ignore_index=True) if frames else None


def check_claims(summary: pd.DataFrame | None, traces: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per claim: claim, expected, measured, verdict, and the metric the accuracies are read on."""
    ev = Evidence(summary, traces)
    rows = []
    for c in CLAIMS:
        try:
            v = c.check(ev)
        except (KeyError, ValueError, TypeError) as err:  # a summary without a column the claim needs
            v = Verdict(NOT_RUN, f"cannot be checked on these results ({type(err).__name__}: {err})")
        rows.append({"claim": c.name, "expected": c.expected, "measured": v.measured, "verdict": v.verdict,
                     "metric": ev.metric})
    return pd.DataFrame(rows, columns=["claim", "expected", "measured", "verdict", "metric"])


METRIC_WORDS = {"final_local_acc": "the local models averaged over workers (the paper's metric)",
                "final_test_acc": "the averaged model (these runs did not score every local model)"}


def claims_markdown(table: pd.DataFrame) -> str:
    metric = table["metric"].iloc[0] if len(table) else "final_test_acc"
    head = (f"Each of the paper's qualitative claims checked on this study's runs, accuracies in % of "
            f"{METRIC_WORDS.get(metric, metric)}. \"not run\": the study has no runs that test it.\n\n")
    shown = table[["claim", "expected", "measured", "verdict"]]
    return head + shown.to_markdown(index=False, disable_numparse=True) + "\n"
