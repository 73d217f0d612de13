"""The spectral study's claim beyond the paper: across graphs at one n, the gap to all-reduce follows the
effective number of neighbours n_W(γ) of Vogels, Hendrikx and Jaggi (NeurIPS 2022, "Beyond spectral gap")
more closely than the spectral gap ρ.

Per decentralized method: each graph's mean gap to all-reduce over the seeds paired with all-reduce's,
Spearman's rank correlation of that gap with ρ and with n_W (at the decay of analysis.load.N_EFF_DECAY; both
are expected negative: more mixing, less gap), the one-sided permutation test that the gap falls with n_W,
and a percentile bootstrap over the graphs of Spearman(ρ, gap) − Spearman(n_W, gap), which lies above 0 when
n_W is the better predictor. The claim needs graphs on which the two disagree: at least one pair of equal ρ
(within EQUAL_RHO) whose n_W differ by DIFFERENT_N_EFF or more (the complete graph and Base-(k+1) graphs all
have ρ = 1; the ring and the star nearly the same small ρ)."""
from __future__ import annotations

import itertools
import math

import numpy as np

from analysis.claims.base import Verdict, claim, combine, decide, incomplete, rank_trend
from analysis.claims.evidence import METRIC_WORDS, Evidence
from analysis.claims.stats import bootstrap_correlation_difference, spearman
from analysis.load import N_EFF_DECAY
from analysis.selection import REFERENCE

IID = ("shuffle", "split")
MIN_GRAPHS = 5
EQUAL_RHO = 1.25  # two spectral gaps within this factor of each other count as equal
DIFFERENT_N_EFF = 1.5  # and two n_W this factor apart as different


def _slice(ev: Evidence):
    """Decentralized runs of one (task, n, partition, network): the i.i.d. partition when there is one, then
    the setting with the most graphs that report both ρ and n_W."""
    runs = ev.runs()
    if runs.empty or "n_eff" not in runs:
        return runs.iloc[0:0], {}
    runs = runs[(runs["algorithm"] != REFERENCE) & runs["spectral_gap"].notna() & runs["n_eff"].notna()]
    if runs.empty:
        return runs, {}
    if "data" in runs and runs["data"].nunique() > 1:
        present = set(runs["data"].dropna())
        scheme = next((s for s in IID if s in present), runs["data"].value_counts().idxmax())
        runs = runs[runs["data"] == scheme]
    keys = [k for k in ("task", "nodes", "data", "network") if k in runs and runs[k].notna().any()]
    best = runs.groupby(keys)["topology"].nunique().idxmax()
    where = dict(zip(keys, best if isinstance(best, tuple) else (best,)))
    for key, value in where.items():
        runs = runs[runs[key] == value]
    return runs, where


def disagreeing_pairs(graphs: dict[str, tuple[float, float]]) -> list[tuple[str, str]]:
    """Pairs of graphs (name → (ρ, n_W)) of equal ρ within EQUAL_RHO whose n_W differ by DIFFERENT_N_EFF."""
    out = []
    for (a, (rho_a, n_a)), (b, (rho_b, n_b)) in itertools.combinations(sorted(graphs.items()), 2):
        if rho_a > 0 and rho_b > 0 and max(rho_a, rho_b) / min(rho_a, rho_b) <= EQUAL_RHO \
                and max(n_a, n_b) / min(n_a, n_b) >= DIFFERENT_N_EFF:
            out.append((a, b))
    return out


@claim("gap-follows-effective-neighbours",
       "The effective number of neighbours predicts the gap better than the spectral gap",
       "across graphs at one n, the gap to all-reduce is predicted better by the effective number of "
       f"neighbours n_W(γ = {N_EFF_DECAY:g}) of Vogels et al. 2022 than by the spectral gap ρ (spectral study)",
       f"each decentralized method on ≥ {MIN_GRAPHS} graphs at one n, among them two of equal ρ (within "
       f"{EQUAL_RHO:g}×) and n_W {DIFFERENT_N_EFF:g}× apart, all-reduce at that n, each seed paired with "
       "all-reduce's; per method: one-sided permutation test of Spearman(n_W, mean gap) < 0 at 5 %, and "
       "Spearman(ρ, gap) − Spearman(n_W, gap) with its 95 % bootstrap interval over graphs above 0")
def gap_follows_effective_neighbours(ev: Evidence) -> Verdict:
    runs, where = _slice(ev)
    if runs.empty:
        return incomplete(["decentralized runs on graphs that report ρ and n_W (run.json topology n_eff; "
                           "summarize again if the summary predates it)", "all-reduce at their n"])
    ref = ev.runs(REFERENCE, **where)
    missing = []
    line = ev.shortfall(f"all-reduce at n = {where.get('nodes')}", ref, algorithm=REFERENCE, where=where)
    if line:
        missing.append(line)
    methods = sorted({(a, c) for a, c in zip(runs["algorithm"], runs["comp"])})
    cells = {}
    for algorithm, comp in methods:
        label = f"{algorithm}/{comp}"
        mine = runs[(runs["algorithm"] == algorithm) & (runs["comp"] == comp)]
        for topology in sorted(set(mine["topology"])):
            cell = mine[mine["topology"] == topology]
            cells[(label, topology)] = cell
            line = ev.shortfall(f"{label} on {topology}", cell, paired_with=ev.seeds(ref), algorithm=algorithm,
                                compressor=comp, where={"topology": topology, **where})
            if line:
                missing.append(line)
        count = mine["topology"].nunique()
        if count < MIN_GRAPHS:
            missing.append(f"≥ {MIN_GRAPHS} graphs of {label} (have {count})")
    # a random graph may be drawn per seed: its median ρ and n_W
    graphs = {t: (float(g["spectral_gap"].median()), float(g["n_eff"].median())) for t, g in runs.groupby("topology")}
    pairs = disagreeing_pairs(graphs)
    if not pairs:
        missing.append(f"two graphs of equal ρ (within {EQUAL_RHO:g}×) whose n_W differ by {DIFFERENT_N_EFF:g}× "
                       f"or more (have {', '.join(f'{t} ρ {r:.3g} n_W {n:.3g}' for t, (r, n) in sorted(graphs.items()))})")
    metric = ev.metric(*cells.values(), ref)
    reads = METRIC_WORDS[metric]
    if missing:
        return incomplete(missing, reads)

    ref_acc = ev.accuracy(ref, metric)
    parts, lines = [], []
    for algorithm, comp in methods:
        label = f"{algorithm}/{comp}"
        topologies = sorted(t for (m, t) in cells if m == label)
        gaps = []
        for t in topologies:
            acc = ev.accuracy(cells[(label, t)], metric)
            seeds = sorted(set(acc) & set(ref_acc))
            gaps.append(float(np.mean([ref_acc[s] - (0.0 if math.isnan(acc[s]) else acc[s]) for s in seeds])))
        rho = [graphs[t][0] for t in topologies]
        n_w = [graphs[t][1] for t in topologies]
        trend, r_n, p = rank_trend(n_w, gaps, "less")
        r_rho = spearman(rho, gaps)
        d, low, high = bootstrap_correlation_difference(rho, n_w, gaps, ev.level)
        better = decide(low, high, 0.0, above=True) if math.isfinite(low) else "inconclusive"
        parts += [trend, better]
        lines.append(f"{label} over {len(topologies)} graphs: Spearman(n_W, gap) = {r_n:.2f} (one-sided permutation "
                     f"p = {p:.2g}, {trend}), Spearman(ρ, gap) = {r_rho:.2f}; difference {d:.2f}, "
                     f"{100 * ev.level:g} % bootstrap interval over graphs {low:.2f} to {high:.2f} ({better})")
    shown = "; ".join(f"{a} and {b}" for a, b in pairs[:3])
    text = (f"n = {where.get('nodes')}, data {where.get('data')}, n_W at γ = {N_EFF_DECAY:g}; equal ρ, different "
            f"n_W: {shown}. " + "; ".join(lines))
    verdict = combine(parts)
    reason = {"holds": "for every method, n_W ranks the gaps and beats ρ as a predictor",
              "fails": "for some method, the gaps rank against n_W or ρ predicts them better"}.get(
        verdict, "for some method, a test or interval does not decide")
    return Verdict(verdict, text, reads, reason=reason)
