"""The scaling study's claim: the gap to all-reduce grows as the spectral gap shrinks, and at the largest n
the torus is ahead of the ring. Both halves are required, and both read one metric."""
from __future__ import annotations

import math

import numpy as np

from analysis.claims.base import Verdict, claim, combine, decide, incomplete, rank_trend
from analysis.claims.evidence import METRIC_WORDS, Evidence
from analysis.claims.stats import bootstrap_mean, interval_text
from analysis.selection import REFERENCE

IID = ("shuffle", "split")
MIN_CELLS = 4  # (topology, n) cells: a one-sided permutation test of 4 points can reach p = 1/24


def _slice(ev: Evidence):
    """Choco runs of one compressor, partition and network: the i.i.d. partition when there is one, then
    the compressor and network run on the most (topology, n) cells."""
    choco = ev.runs("choco")
    if choco.empty:
        return choco, {}
    if "data" in choco and choco["data"].nunique() > 1:
        present = set(choco["data"].dropna())
        scheme = next((s for s in IID if s in present), choco["data"].value_counts().idxmax())
        choco = choco[choco["data"] == scheme]
    keys = [k for k in ("comp", "network", "task") if k in choco]
    best = choco.groupby(keys)[["topology", "nodes"]].apply(lambda g: len(g.drop_duplicates())).idxmax()
    best = best if isinstance(best, tuple) else (best,)
    where = dict(zip(keys, best))
    for key, value in where.items():
        choco = choco[choco[key] == value]
    if "data" in choco and len(choco):
        where["data"] = choco["data"].iloc[0]
    return choco, where


def _gap(ref: dict, acc: dict, seeds) -> float:
    # a diverged run reads as 0 %: its gap is the all-reduce accuracy itself
    return float(np.mean([ref[s] - (0.0 if math.isnan(acc[s]) else acc[s]) for s in seeds]))


@claim("gap-grows-as-spectral-gap-shrinks", "The gap to all-reduce grows as the spectral gap shrinks",
       "the gap to all-reduce grows as the spectral gap shrinks, and at the largest n the torus is ahead of "
       "the ring (scaling study)",
       f"Choco-SGD (one compressor) on ring and torus at ≥ 2 common n and ≥ {MIN_CELLS} (topology, n) cells, "
       "all-reduce at every n, each seed paired with all-reduce's; one-sided permutation test of "
       "Spearman(spectral gap, mean gap) < 0 at 5 %, and the torus-minus-ring accuracy at the largest n with "
       "its 95 % bootstrap interval above 0")
def gap_and_graph(ev: Evidence) -> Verdict:
    choco, where = _slice(ev)
    if choco.empty:
        return incomplete(["Choco-SGD runs on ring and torus at ≥ 2 node counts", "all-reduce at those n"])
    label = f"choco/{where.get('comp')}"
    missing, cells, refs = [], {}, {}
    for n in sorted(set(choco["nodes"])):
        ref_where = {k: where[k] for k in ("task", "data", "network") if k in where}
        ref = ev.runs(REFERENCE, nodes=n, **ref_where)
        refs[n] = ref
        line = ev.shortfall(f"all-reduce at n = {n}", ref, algorithm=REFERENCE, where={"nodes": n, **ref_where})
        if line:
            missing.append(line)
        for topology in sorted(set(choco.loc[choco["nodes"] == n, "topology"])):
            runs = choco[(choco["nodes"] == n) & (choco["topology"] == topology)]
            cells[(topology, n)] = runs
            line = ev.shortfall(f"{label} on {topology} n = {n}", runs, paired_with=ev.seeds(ref),
                                algorithm="choco", compressor=where.get("comp"),
                                where={"nodes": n, "topology": topology, **ref_where})
            if line:
                missing.append(line)
    both = sorted({n for t, n in cells if t == "ring"} & {n for t, n in cells if t == "torus"})
    if len(both) < 2:
        missing.append(f"{label} on ring and torus at ≥ 2 common n (common: {', '.join(map(str, both)) or 'none'})")
    if len(cells) < MIN_CELLS:
        missing.append(f"≥ {MIN_CELLS} (topology, n) cells of {label} (have {len(cells)})")
    metric = ev.metric(*cells.values(), *refs.values())
    reads = METRIC_WORDS[metric]
    if missing:
        return incomplete(missing, reads)

    ref_acc = {n: ev.accuracy(r, metric) for n, r in refs.items()}
    acc = {key: ev.accuracy(runs, metric) for key, runs in cells.items()}
    seeds = {key: sorted(set(a) & set(ref_acc[key[1]])) for key, a in acc.items()}
    gaps = {key: _gap(ref_acc[key[1]], acc[key], seeds[key]) for key in cells}
    rho_of = {key: float(runs["spectral_gap"].iloc[0]) for key, runs in cells.items()}
    keys = sorted(cells)
    trend, rho, p = rank_trend([rho_of[k] for k in keys], [gaps[k] for k in keys], "less")
    n = both[-1]
    paired = sorted(set(seeds[("torus", n)]) & set(seeds[("ring", n)]))
    lead = [(0.0 if math.isnan(acc[("torus", n)][s]) else acc[("torus", n)][s])
            - (0.0 if math.isnan(acc[("ring", n)][s]) else acc[("ring", n)][s]) for s in paired]
    if len(paired) < ev.min_seeds:
        return incomplete([f"{label} on ring and torus at n = {n}: {len(paired)} of {ev.min_seeds} common seeds"], reads)
    mean, low, high = bootstrap_mean(lead, ev.level)
    ahead = decide(low, high, 0.0, above=True)
    text = (f"{label}, data {where.get('data')}: Spearman(spectral gap, gap) = {rho:.2f}, one-sided permutation "
            f"p = {p:.3f} over {len(keys)} (topology, n) cells ({trend}); n = {n}: torus minus ring "
            f"{interval_text(mean, low, high, ' points', len(paired), ev.level)} ({ahead})")
    reason = (f"rank trend of gap against spectral gap: {trend} (p = {p:.2g}); torus ahead of ring at n = {n}: "
              f"{ahead}")
    return Verdict(combine([trend, ahead]), text, reads, reason=reason)
