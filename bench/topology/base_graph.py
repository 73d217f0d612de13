"""The Base-(k+1) graph of Takezawa, Sato, Bao, Niwa and Yamada (NeurIPS 2023, "Beyond Exponential Graph:
Communication-Efficient Topologies for Decentralized Learning via Finite-time Convergence", Sec. 4): a periodic
sequence of gossip rounds in which every worker has at most k peers and whose product over one period is
exactly J = 11ᵀ/n, for any n. Three pieces, as in the paper:

* k-peer hyper-hypercube (n with every prime factor <= k+1): write n = f_1 ⋯ f_L with 2 <= f_r <= k+1 and
  node i in mixed radix; round r averages each clique of the f_r nodes that differ only in digit r (weight
  1/f_r), so after L rounds every node holds the average.
* Simple Base-(k+1) graph (any n): write n in base k+1, n = Σ_l a_l (k+1)^{p_l} with p_0 > p_1 > … and
  a_l in 1..k, and split the nodes into groups V_l of those sizes, each made of a_l subgroups of (k+1)^{p_l}.
  (1) every group averages itself by a hyper-hypercube; (2) in round l of the second phase every node of a
  later group (l' > l) links to one node of each subgroup of V_l and takes the share c_l = |V_l| / Σ_{l'>=l}|V_l'|
  of V_l's value (c_l / a_l from each); since all later groups together have fewer than (k+1)^{p_l} nodes, each
  node of V_l gets at most one such link; (3) right after its round, V_l's subgroups re-average by
  hyper-hypercubes, which leaves the global average on V_l (each subgroup gave and received the same), while
  the last group ends phase (2) holding it. At most 2 log_{k+1} n + 2 rounds.
* Base-(k+1) graph: with n = s·r, s the largest divisor of n whose prime factors are <= k+1, run the simple graph
  on the s blocks of r consecutive nodes in parallel and then a hyper-hypercube across the blocks; keep whichever
  of this and the simple graph on all n nodes takes fewer rounds (the authors' rule; a tie keeps the split).

The rounds a group would otherwise sit out are the authors' (yukiTakezawa/BaseGraph): it repeats its own
averaging, and in a group's round of phase (2) its unlinked nodes average in cliques (``inner_edges``, on by
default; the iterates are the same either way, W and its spectral quantities are not). The matrices equal the
authors' in all cases n = 2..64, k = 1..4, both variants (tests/test_base_graphs.py keeps some). A round is a list
of disjoint blocks (members, their symmetric doubly stochastic weights); a node in no block keeps its value.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import BenchError
from ..specs import Spec

if TYPE_CHECKING:  # scipy is imported where a sparse matrix is built: a static-topology run never loads it
    from scipy.sparse import csr_matrix

Block = tuple[list[int], np.ndarray]
Round = list[Block]


def peers_of(spec: Spec) -> int:
    """K of ``base:K``: an integer >= 1 (its one option, ``inner_edges``, is read by the builder)."""
    spec.check_options({"inner_edges"})
    if spec.arg is None:
        raise BenchError(f"{spec.text!r} needs the most peers a round, e.g. base:1 (an integer K >= 1)")
    if not re.fullmatch(r"[+-]?[0-9]+", spec.arg):  # not int(): it takes "1_0" and "²"
        raise BenchError(f"peers a round K={spec.arg!r} in {spec.text!r} is not an integer (need K >= 1)")
    k = int(spec.arg)
    if k < 1:
        raise BenchError(f"peers a round K={k} in {spec.text!r} must be >= 1 (a worker needs a peer to average with)")
    return k


def factors(m: int, k: int) -> list[int] | None:
    """m as a product of factors in 2..k+1, largest first taken (None if m has a prime factor above k+1)."""
    out, rest = [], m
    for f in range(k + 1, 1, -1):
        while rest % f == 0:
            out.append(f)
            rest //= f
    return sorted(out) if rest == 1 else None


def smooth_part(n: int, k: int) -> int:
    """The largest divisor of n whose prime factors are all <= k+1."""
    rest = n
    for f in range(2, k + 2):
        while rest % f == 0:
            rest //= f
    return n // rest


def base_digits(m: int, k: int) -> list[tuple[int, int]]:
    """m in base k+1 as (a, p) pairs with a in 1..k, highest power first: m = Σ a·(k+1)^p."""
    digits, p = [], 0
    while m:
        m, a = divmod(m, k + 1)
        if a:
            digits.append((a, p))
        p += 1
    return digits[::-1]


def _clique(members: list[int]) -> Block:
    return members, np.full((len(members), len(members)), 1.0 / len(members))


def hyper_hypercube(nodes: Sequence[int], k: int) -> list[Round]:
    """The k-peer hyper-hypercube on ``nodes`` (their count must have no prime factor above k+1)."""
    nodes = list(nodes)
    radices = factors(len(nodes), k)
    if radices is None:
        raise ValueError(f"{len(nodes)} nodes have a prime factor above k+1 = {k + 1}")
    rounds, stride = [], 1
    for f in radices:
        # the nodes whose digit at this position is 0 start one clique each: base + t·stride, t < f
        starts = [i for i in range(len(nodes)) if (i // stride) % f == 0]
        rounds.append([_clique([nodes[i + t * stride] for t in range(f)]) for i in starts])
        stride *= f
    return rounds


def _merge(into: list[Round], rounds: list[Round], offset: int) -> None:
    """Add ``rounds`` (on nodes disjoint from what ``into`` holds there) from round ``offset`` on."""
    while len(into) < offset + len(rounds):
        into.append([])
    for r, blocks in enumerate(rounds):
        into[offset + r].extend(blocks)


def _cycling(rounds: list[Round], m: int) -> Round:
    """Round ``m`` of a sequence repeated for as long as asked (none for a sequence of no rounds)."""
    return rounds[m % len(rounds)] if rounds else []


def _star_round(groups: list[list[int]], subgroups: list[list[int]], l: int, k: int, inner_edges: bool) -> Round:
    """Phase (2), group ``l``'s round: every node of a later group, the last group first, links to the last
    not yet linked node of each subgroup of V_l, taking the share c_l of V_l's value (c_l / a_l from each); with
    ``inner_edges`` the nodes of V_l left unlinked average in cliques of k+1 (of what is left), as the authors'
    code does (their values are equal by then: it changes W, not the iterates)."""
    remaining = sum(len(g) for g in groups[l:])
    share, a = len(groups[l]) / remaining, len(subgroups[l])
    free = [list(u) for u in subgroups[l]]
    blocks: Round = []
    for group in reversed(groups[l + 1:]):
        for i in group:  # fewer later nodes than a subgroup has: a free node is always left
            weights = np.zeros((a + 1, a + 1))
            weights[0, 0] = 1.0 - share
            weights[0, 1:] = weights[1:, 0] = share / a
            weights[np.arange(1, a + 1), np.arange(1, a + 1)] = 1.0 - share / a
            blocks.append(([i] + [u.pop() for u in free], weights))
    left = [i for u in free for i in u]
    while inner_edges and len(left) > 1:
        blocks.append(_clique(left[:k + 1]))
        left = left[k + 1:]
    return blocks


def simple_base_graph(nodes: Sequence[int], k: int, inner_edges: bool = True) -> list[Round]:
    """The Simple Base-(k+1) graph on ``nodes`` (module docstring, phases 1–3), with the authors' schedule of
    the rounds a group would otherwise sit out: in phase (1) a group whose hyper-hypercube is done runs it again,
    and after its round of phase (2) a group's subgroups (a group smaller than k+1: the group) repeat theirs
    until the period ends, which is when the first group's subgroups have averaged once."""
    nodes = list(nodes)
    if len(nodes) == 1:
        return []
    if factors(len(nodes), k) is not None:
        return hyper_hypercube(nodes, k)
    groups, subgroups, start = [], [], 0
    for a, p in base_digits(len(nodes), k):
        size = (k + 1) ** p
        group = nodes[start:start + a * size]
        groups.append(group)
        subgroups.append([group[t * size:(t + 1) * size] for t in range(a)])
        start += a * size
    L = len(groups)
    whole = [hyper_hypercube(g, k) for g in groups]  # (1), the first group's the longest
    # (3): each subgroup's hyper-hypercube; a group of fewer than k+1 nodes (single-node subgroups) its own
    parts = [[hyper_hypercube(u, k) for u in subs] if len(g) >= k + 1 else [whole[l]]
             for l, (g, subs) in enumerate(zip(groups, subgroups))]
    first = len(whole[0])
    rounds: list[Round] = [[b for rs in whole for b in _cycling(rs, m)] for m in range(first)]
    period = first + 1 + len(parts[0][0])
    for m in range(first, period):
        star = m - first  # the group whose round of phase (2) this is, while there is one
        blocks = _star_round(groups, subgroups, star, k, inner_edges) if star < L - 1 else []
        for l in range(L):
            since = m - first - l - 1 if l < L - 1 else m - first - (L - 1)  # rounds of (3) before this one
            if since >= 0:
                blocks.extend(b for rs in parts[l] for b in _cycling(rs, since))
        rounds.append(blocks)
    return rounds


def base_graph(n: int, k: int, inner_edges: bool = True) -> list[Round]:
    """The Base-(k+1) graph on n nodes: the shorter of the simple graph and the split n = s·r (module docstring)."""
    simple = simple_base_graph(range(n), k, inner_edges)
    s = smooth_part(n, k)
    r = n // s
    if s == 1 or r == 1:  # the split is the simple graph itself
        return simple
    split: list[Round] = []
    for b in range(s):  # the blocks keep their inner edges whatever is asked: the authors' code does so
        _merge(split, simple_base_graph(range(b * r, (b + 1) * r), k), 0)
    inner = len(split)
    for j in range(r):
        _merge(split, hyper_hypercube(range(j, n, r), k), inner)
    return simple if len(simple) < len(split) else split


def round_matrix(n: int, blocks: Round) -> csr_matrix:
    """The n×n gossip matrix of one round: each block's weights on its members, 1 on the diagonal elsewhere."""
    from scipy.sparse import csr_matrix

    rows, cols, values = [], [], []
    alone = np.ones(n, dtype=bool)
    for members, weights in blocks:
        index = np.asarray(members, dtype=np.int64)
        if not alone[index].all():
            raise ValueError("blocks of one round overlap")
        alone[index] = False
        rows.append(np.repeat(index, len(index)))
        cols.append(np.tile(index, len(index)))
        values.append(weights.ravel())
    idle = np.flatnonzero(alone)
    rows.append(idle)
    cols.append(idle)
    values.append(np.ones(len(idle)))
    return csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))


def base_graph_matrices(n: int, k: int, inner_edges: bool = True) -> list[csr_matrix]:
    """W_0 … W_{τ−1} of the Base-(k+1) graph on n nodes."""
    return [round_matrix(n, blocks) for blocks in base_graph(n, k, inner_edges)]
