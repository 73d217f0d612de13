"""Where the average of the models goes, for every registered method that keeps it, in float64 on the simulated
communicator: a round moves it exactly as SGD on the average direction, mean(x_{t+1}) = mean(x_t) − η_t mean(d_t),
with a step η_t that changes every round, and gossip alone (no gradient) leaves it where it is; a tracker keeps the
average direction. On a regular and an irregular static graph and on a
time-varying one, per layer and flat, with each of the method's examples of options and every compressor example it
takes; and on a network that loses messages, delivers them late or sits workers out, as far as the method's fault
rule promises it (and a one-way loss moves the average of a method that reweights).

Which methods keep it is read from what their classes declare (bench/algorithms/), never from a list of names; one
that says it does not (with no error-feedback buffer to hold it to instead) is shown to move it when it compresses."""
from __future__ import annotations

import dataclasses
import math
import typing

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig, parse_options
from bench.compressors import COMPRESSORS as OPERATORS, make_compressor
from bench.errors import BenchError
from bench.faults import parse_faults
from bench.faults.away import kept_rows, restore_rows
from bench.topology import make_topology
from test_algorithms import Quadratic, build, runs_on, start

LR = 0.05
# three layers compressed by themselves (low rank by their shape) and a row of 3: per-layer compression
SEGMENTS, SHAPES = [12, 5, 20, 3], [(3, 4), (5,), (4, 5), (1, 3)]
# the first example of every operator: the identity holds whatever a message holds, as long as both ends of a link
# take the same one, so one form of each operator (deterministic, random, sparse, quantised) is enough
COMPRESSORS = [OPERATORS.get(name).examples[0] for name in OPERATORS.names() if OPERATORS.get(name).examples]


# a method keeps it as its class says (``keeps_average``): it sends exact models (a doubly stochastic gossip, an
# all-reduce, a pairwise averaging) or mixes public copies by a consensus step (x_i += γ Σ_j w_ij (x̂_j − x̂_i), which
# sums to zero over the workers). One that compresses its own step (DCD, ECD) or applies a compressed mean (the
# centralized ones with error feedback) does not, and is held to it with exact messages only.
KEEPERS = [name for name in ALGORITHMS.names() if ALGORITHMS.get(name).keeps_average]


def takes(cls, spec: str) -> bool:
    try:
        cls.check_compressor(make_compressor(spec, contraction=cls.contraction))
    except BenchError:
        return False
    return True


def _compressors(cls) -> list[str]:
    """What the method keeps the average under: every compressor it takes, when it keeps it whatever is sent; else
    exact messages (`none`), under which a method that compresses its own step or a mean sends it exactly too
    (not one that compresses by its own scheme, e.g. low rank, which `none` leaves on)."""
    if cls.keeps_average:
        return [c for c in COMPRESSORS if takes(cls, c)]
    return ["none"] if not cls.own_compression and takes(cls, "none") else []


def _examples(cls) -> list[dict]:
    """The method's examples of options, and each value of an option that takes a few words (the order of
    gossip and step): each is a code path of its own."""
    out = [dict(e) for e in cls.examples]
    hints = typing.get_type_hints(cls.Options)
    for f in dataclasses.fields(cls.Options):
        if typing.get_origin(hints.get(f.name)) is typing.Literal:
            out += [{**cls.examples[0], f.name: word} for word in typing.get_args(hints[f.name])]
    unique = {}  # one of each distinct set of options (an example may spell a default out)
    for example in out:
        unique.setdefault(repr(parse_options(cls, example)), example)
    # an option may give the promise up (AdaGossip's step per coordinate): held to it without that option
    return [e for e in unique.values() if cls.keeps_average_with(parse_options(cls, e))]


def build_method(name, topo, x0, compressor, options, faults=None, layers=False):
    return build(name, topo, x0, compressor, options, LocalStepConfig(momentum=0.5, weight_decay=1e-3), faults=faults,
                 segments=SEGMENTS if layers else None, shapes=SHAPES if layers else None)


def recording(algo) -> list[torch.Tensor]:
    """The local step's directions d_t as the method takes them in (appended to the list returned)."""
    directions, original = [], algo.local.direction

    def record(x, g):
        out = original(x, g)
        directions.append(out.clone())
        return out

    algo.local.direction = record
    return directions


def _scale(algo) -> float:
    """The largest quantity of the method's state: what float64 rounding is relative to."""
    return max([1.0] + [float(v.abs().max()) for v in algo.state_dict().values()
                        if torch.is_tensor(v) and v.is_floating_point() and v.numel()])


def _misses(algo, problem, steps, gradient=True, away_at=None) -> tuple[float, int]:
    """(the largest miss of mean(x) after a step from mean(x) − (η_t/n) Σ_{i present} d_i, relative to the state's
    scale; the rounds with a worker away). Workers away are sat out as the runner does it (bench/faults/away.py):
    their rows of x and of the per-worker state are put back after the step."""
    directions, n, worst, sat_out = recording(algo), algo.x.shape[0], 0.0, 0
    for t in range(steps):
        away = torch.as_tensor(away_at(t).nonzero()[0]) if away_at else torch.zeros(0, dtype=torch.long)
        present = torch.ones(n, dtype=torch.bool)
        present[away] = False
        before, x_away = algo.x.mean(0).clone(), algo.x[away].clone()
        kept = kept_rows(algo.worker_state(), away, n)
        lr = LR * (1 + 0.5 * math.sin(t))  # a schedule's step
        algo.step(problem.grad(algo.gradient_point()) if gradient else None, lr)
        restore_rows(algo.worker_state(), away, kept, n)
        assert torch.equal(algo.x[away], x_away)
        expected = before - lr * directions[-1][present].sum(0) / n if gradient else before
        worst = max(worst, float((algo.x.mean(0) - expected).abs().max()) / _scale(algo))
        sat_out += len(away)
    return worst, sat_out


GRAPHS = [("torus", 9), ("star", 7), ("one-peer-exp", 16)]  # regular, irregular, time-varying
# every method on every graph it runs on with some example of its options (a method may refuse a changing graph)
ON_GRAPHS = [pytest.param(name, spec, n, id=f"{name}-{spec}") for name in ALGORITHMS.names() for spec, n in GRAPHS
             if _compressors(ALGORITHMS.get(name))
             and any(runs_on(ALGORITHMS.get(name), spec, n, e) for e in _examples(ALGORITHMS.get(name)))]


@pytest.mark.parametrize("name, spec, n", ON_GRAPHS)
def test_the_average_moves_as_sgd_on_the_average_direction(name, spec, n):
    """Each example of options the graph takes × each compressor of ``_compressors``: per layer with gradients,
    flat with gradients, and per layer without (the average does not move); exact up to float64 rounding."""
    cls = ALGORITHMS.get(name)
    for example in (e for e in _examples(cls) if runs_on(cls, spec, n, e)):
        for compressor in _compressors(cls):
            for layers, gradient in ((True, True), (False, True), (True, False)):
                d = sum(SEGMENTS) if layers else 40
                algo = build_method(name, make_topology(spec, n), start(n, d, identical=False), compressor, example,
                              layers=layers)
                worst, _ = _misses(algo, Quadratic(n, d), 10, gradient)  # 2.5 periods of one-peer-exp
                assert worst < 1e-13, (example, compressor, layers, gradient, worst)


def _gives_up(cls, options) -> bool:
    """Whether the method says it does not keep the average with these options and holds no error-feedback buffer
    (one that does lags it by that buffer: tests/test_laws.py)."""
    return not cls.error_feedback and not (cls.keeps_average and cls.keeps_average_with(parse_options(cls, options)))


MOVERS = [pytest.param(name, e, spec, id=f"{name}-{e}-{spec}") for name in ALGORITHMS.names()
          for e in ALGORITHMS.get(name).examples for spec in ("exponential", "one-peer-exp")
          if _gives_up(ALGORITHMS.get(name), e) and runs_on(ALGORITHMS.get(name), spec, 16, e)]


@pytest.mark.parametrize("name, options, spec", MOVERS)
def test_where_a_method_says_it_does_not_keep_the_average_compression_moves_it(name, options, spec):
    """Why it is held to the average with exact messages only (DCD and ECD compress their own step) or not at all
    (AdaGossip's step per worker and coordinate): gossip alone, with each operator it takes, on a static and a
    time-varying graph, moves the average (the static methods and the per-link form alike)."""
    cls = ALGORITHMS.get(name)
    for compressor in (c for c in COMPRESSORS if c != "none" and takes(cls, c)):
        algo = build_method(name, make_topology(spec, 16), start(16, identical=False), compressor, options)
        worst, _ = _misses(algo, Quadratic(16, 40), 10, gradient=False)
        assert worst > 1e-3, (compressor, worst)


# the networks that lose messages, and what each rule promises of them
SYMMETRIC = {"both ways": {"drop": 0.3, "symmetric": True},
             "bursts both ways": {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 4, "symmetric": True},
             "a link down": {"down": [{"edge": [0, 1], "rounds": [0, 100]}]}}
ONE_WAY = {"one way": {"drop": 0.3}, "bursts one way": {"drop": 0.25, "drop_model": "gilbert-elliott", "burst": 4}}
LATE = {"late and lost": {"drop": 0.1, "late": 0.3, "staleness": 2}}
AWAY = {"workers away": {"active": 0.6},
        "a worker away": {"absent": [{"worker": 2, "rounds": [5, 40]}], "drop": 0.2, "symmetric": True},
        "pairwise": {"pairwise": True}}


def _accepts(cls, faults) -> bool:
    try:
        cls.check_faults(parse_faults(faults, 8))
        cls.check_backend("sim")
    except BenchError:
        return False
    return True


def _fault_cases():
    """(method, network, whether the average moves as SGD's there): every network the method accepts whose
    outcome its rule says: losses both ways and workers away (kept, by the present workers' steps), one-way losses
    (kept by the copies per link of an acknowledging rule, "ack"; moved by a reweighting one), late messages
    (kept by a rule that adds a late message at both ends, late_rule "ack")."""
    cases = []
    for name in KEEPERS:
        cls = ALGORITHMS.get(name)
        if cls.fault_rule is None:
            continue
        for label, faults in {**SYMMETRIC, **ONE_WAY, **AWAY}.items():
            if _accepts(cls, faults):
                keeps = label not in ONE_WAY or cls.fault_rule == "ack"
                cases.append(pytest.param(name, faults, keeps, id=f"{name}-{label}"))
        for label, faults in LATE.items():
            if cls.late_rule == "ack" and _accepts(cls, faults):
                cases.append(pytest.param(name, faults, True, id=f"{name}-{label}"))
    return cases


@pytest.mark.parametrize("name, faults, keeps", _fault_cases())
def test_what_a_fault_rule_keeps_of_the_average(name, faults, keeps):
    """On a ring of 8 for 20 rounds, each example of options × each compressor the method takes; a
    network that changes nothing would prove nothing: some messages are lost or late, or some workers away."""
    cls = ALGORITHMS.get(name)
    topo = make_topology("ring", 8)
    for example in _examples(cls):
        for compressor in _compressors(cls):
            algo = build_method(name, topo, start(8, identical=False), compressor, example, faults)
            schedule = algo.comm.faults  # a pure function of (seed, round, link)
            assert sum(int(schedule.lost_union(t).sum() + schedule.late_union(t).sum() + schedule.away(t).sum())
                       for t in range(20)) > 0
            worst, _ = _misses(algo, Quadratic(8, 40), 20, away_at=schedule.away)
            if keeps:
                assert worst < 1e-13, (example, compressor, worst)
            else:  # directed losses leave W'_t's columns summing to other than 1
                assert worst > 1e-3, (example, compressor, worst)


TRACKER_CASES = [pytest.param(name, spec, n, faults, id=f"{name}-{label}") for name in ALGORITHMS.names()
                 if ALGORITHMS.get(name).tracker for label, (spec, n, faults) in {
                     "torus": ("torus", 9, None), "one-peer-exp": ("one-peer-exp", 16, None),
                     **{label: ("ring", 8, f) for label, f in {**ONE_WAY, "both ways": SYMMETRIC["both ways"],
                                                               **LATE}.items()}}.items()]


@pytest.mark.parametrize("name, spec, n, faults", TRACKER_CASES)
def test_the_tracker_keeps_the_average_direction(name, spec, n, faults):
    """mean((W − I) g) = 0 for a doubly stochastic W, the round's W_t, or copies per link that add a message at both
    ends, at neither (lost) or when it lands (late): the tracker starts at d⁰ and gains d_t − d_{t−1}, so
    mean(v_t) = mean(d_t), for every compressor the method takes."""
    cls = ALGORITHMS.get(name)
    topo, problem = make_topology(spec, n), Quadratic(n, 40)
    for compressor in _compressors(cls):
        algo = build_method(name, topo, start(n, identical=False), compressor, cls.examples[0], faults)
        directions, lost = recording(algo), 0
        for _ in range(25):
            lost += algo.step(problem.grad(algo.x), LR).link_lost
            tracker = getattr(algo, cls.tracker)  # sums a difference of directions a step: rounding grows with them
            tol = 1e-13 * max(1.0, float(tracker.abs().max())) * len(directions)
            torch.testing.assert_close(tracker.mean(0), directions[-1].mean(0), rtol=0, atol=tol)
        assert lost > 0 or faults is None
