"""The laws each algorithm declares on its class (bench/algorithms/base.py), one test per law over every registered
algorithm, in float64 on the simulated communicator: with exact messages and given options it is another method or a
reference written out here in numpy, on static graphs and a changing one (exact_forms), under given options it is
another method's run message for message (same_run_as), on heterogeneous least squares it reaches the optimum D-PSGD
misses (exact_optimum), a round sends its declared messages with the compressor's bits on each link, every knob runs
anywhere inside its declared range, gossip alone brings the models to their average (gossip_alone), error feedback
only delays what it drops (error_feedback) and so reaches the optimum under a decaying step (decaying_optimum), and
what its declarations say it cannot run is refused in one line. A new method is in by declaring; no list of names
here."""
import functools
import math

import numpy as np
import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStepConfig, parse_options
from bench.compressors import COMPRESSORS as SPECS
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.faults import parse_faults
from bench.topology import make_topology
from test_algorithms import Quadratic, runs_on, start, trajectory
from test_algorithms import build as build_with
from test_keeping_the_average import COMPRESSORS, SHAPES, takes
from test_keeping_the_average import SEGMENTS as LAYERS

D, STEPS, LR = 40, 25, 0.05
LOCAL = LocalStepConfig(momentum=0.5, nesterov=True, weight_decay=1e-2)
NAMES = ALGORITHMS.names()


def build(name, topo, x0, compressor, options, faults=None, segments=None):
    return build_with(name, topo, x0, compressor, options, LOCAL, faults=faults, segments=segments)


# ---- the references a method may reduce to, in numpy: each yields x after every step --------------------------
class Local:
    """The local step: d = g + wd·x, m ← μm + d, and Nesterov's d + μm (bench/algorithms/local.py)."""

    def __init__(self):
        self.m = None

    def __call__(self, x, g):
        d = g + LOCAL.weight_decay * x
        self.m = d if self.m is None else LOCAL.momentum * self.m + d
        return d + LOCAL.momentum * self.m


def gossip_then_step(W, x, grad, d, lag=0):  # D-PSGD, Lian et al. 2017; lag 1: gossip with the previous round's W
    for k in range(STEPS):
        x = W(k - lag) @ x - LR * d(x, grad(x))
        yield x


def step_then_gossip(W, x, grad, d):
    for k in range(STEPS):
        x = W(k) @ (x - LR * d(x, grad(x)))
        yield x


def gradient_tracking(W, x, grad, d):
    """x ← Wx − ηv, v ← Wv + d_new − d_old, after a first local step (copies start at 0), from v¹ = d¹."""
    v = previous = None
    for k in range(STEPS):
        direction = d(x, grad(x))
        if k == 0:
            x = x - LR * direction
        else:
            v = direction if k == 1 else W(k - 1) @ v + direction - previous
            x = W(k - 1) @ x - LR * v
        previous = direction
        yield x


def exact_diffusion(W, x, grad, d, decay_shift=None, first_local=False):
    """x^{k+1} = W̄(2x^k − x^{k−1} − α_k d_k + α_{k−1} d_{k−1}), W̄ = (I + W)/2, α_k = lr or lr·m/(k + m); the first
    step W̄(x⁰ − α₀d₀), or x⁰ − α₀d₀ (NIDS, Li et al. 2019, the same recursion after a local first step)."""
    W_bar = (np.eye(len(W(0))) + W(0)) / 2  # on a static graph only (these methods refuse a changing one)
    previous = step_previous = None
    for k in range(STEPS):
        step = (LR * decay_shift / (k + decay_shift) if decay_shift else LR) * d(x, grad(x))
        if k == 0:
            x_next = x - step if first_local else W_bar @ (x - step)
        else:
            x_next = W_bar @ (2 * x - previous - step + step_previous)
        previous, x, step_previous = x, x_next, step
        yield x


def sgd_on_the_mean(W, x, grad, d):
    while True:
        x = x - LR * d(x, grad(x).mean(0, keepdims=True).repeat(len(x), 0))
        yield x


REFERENCES = {"gossip-then-step": gossip_then_step, "step-then-gossip": step_then_gossip,
              "gradient-tracking": gradient_tracking, "exact-diffusion": exact_diffusion,
              "nids": lambda *args: exact_diffusion(*args, first_local=True), "sgd-on-the-mean": sgd_on_the_mean}


def form_runs_on(name: str, k: int, spec: str, n: int) -> bool:
    options, target, target_options = ALGORITHMS.get(name).exact_forms[k]
    return runs_on(ALGORITHMS.get(name), spec, n, options) and (
        target not in NAMES or runs_on(ALGORITHMS.get(target), spec, n, target_options))


FORMS = [pytest.param(name, k, spec, n, id=f"{name}-{k}-{spec}") for name in NAMES
         for k in range(len(ALGORITHMS.get(name).exact_forms))
         for spec, n in (("ring", 8), ("torus", 9), ("erdos-renyi:0.4", 10), ("star", 6), ("one-peer-exp", 16))
         if form_runs_on(name, k, spec, n)]


@pytest.mark.parametrize("name, form, spec, n", FORMS)
def test_with_exact_messages_a_method_is_the_form_it_declares(name, form, spec, n):
    """From a common start (as runs start), worker-specific gradients; exact messages are the `none` operator, or
    a sparsifier that keeps every coordinate for a method that takes only sparsifiers (DGC)."""
    cls = ALGORITHMS.get(name)
    options, target, target_options = cls.exact_forms[form]
    topo, problem, x0 = make_topology(spec, n), Quadratic(n, D), start(n)
    ours = trajectory(build(name, topo, x0, "none" if takes(cls, "none") else "top:1.0", options), problem)
    if target in NAMES:
        theirs = trajectory(build(target, topo, x0, "none", target_options), problem)
    else:
        a, c = problem.a.numpy(), problem.c.numpy()
        W = lambda t: topo.W_at(t % topo.period)  # noqa: E731  (the round's W on a changing graph)
        steps = REFERENCES[target](W, x0.numpy(), lambda x: a * (x - c), Local(), **target_options)
        theirs = np.stack([next(steps) for _ in range(STEPS)])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10)


NETWORKS = {"ring": ("ring", None), "one-peer-exp": ("one-peer-exp", None), "lossy": ("ring", {"drop": 0.3}),
            "late": ("ring", {"late": 0.3, "staleness": 2})}


def both_run_on(name: str, twin: int, network: str) -> bool:
    """Whether the method and the run it declares both take the network (a method without a fault rule refuses
    losses; a graph check may refuse a time-varying graph): only such pairs are compared."""
    cls = ALGORITHMS.get(name)
    options, target, target_options = cls.same_run_as[twin]
    spec, faults = NETWORKS[network]
    return all(not (faults and other.fault_rule is None) and runs_on(other, spec, 8, opts)
               for other, opts in ((cls, options), (ALGORITHMS.get(target), target_options)))


TWINS = [pytest.param(name, k, net, id=f"{name}-{k}-{net}") for name in NAMES
         for k in range(len(ALGORITHMS.get(name).same_run_as)) for net in NETWORKS if both_run_on(name, k, net)]


@pytest.mark.parametrize("name, twin, network", TWINS)
def test_a_method_is_the_run_it_declares_message_for_message(name, twin, network):
    """The iterates and every buffer the two share bit for bit, and the same traffic, random draws included, with
    each operator family the method takes, on a static and a time-varying graph and networks that lose or delay
    messages (where both methods take them)."""
    cls = ALGORITHMS.get(name)
    options, target, target_options = cls.same_run_as[twin]
    spec, faults = NETWORKS[network]
    topo, problem, x0 = make_topology(spec, 8), Quadratic(8, D), start(8, identical=False)
    for compressor in (SPECS.get(f).examples[0] for f in SPECS.names() if SPECS.get(f).examples):
        if not takes(cls, compressor):
            continue
        a, b = build(name, topo, x0, compressor, options, faults), build(target, topo, x0, compressor, target_options,
                                                                        faults)
        for _ in range(STEPS):
            ours, theirs = a.step(problem.grad(a.x), LR), b.step(problem.grad(b.x), LR)
            assert (ours.wire_bits, ours.paper_bits, ours.messages, ours.link_lost) == (
                theirs.wire_bits, theirs.paper_bits, theirs.messages, theirs.link_lost), compressor
            ours, theirs = a.state_dict(), b.state_dict()
            assert all(same(ours[k], theirs[k]) for k in set(ours) & set(theirs) - {"local"}), compressor


def same(u, v) -> bool:
    if torch.is_tensor(u):
        return torch.equal(u, v)
    return all(same(u[k], v[k]) for k in u) if isinstance(u, dict) else u == v


def compressor_of(cls) -> str:
    """The first operator the method takes of sign and top-k; `none` for one that sends exact or its own messages."""
    if not cls.compresses or cls.own_compression:
        return "none"
    return next(c for c in ("sign", "top:0.1") if takes(cls, c))


SEGMENTS, LINKS = [10, 30], {"ring": 2, "one-peer-exp": 1}  # per-layer messages; links out of a worker a round
TRAFFIC = [pytest.param(name, spec, n, id=f"{name}-{spec}") for name in NAMES for spec, n in (("ring", 8), (
    "one-peer-exp", 16)) if ALGORITHMS.get(name).messages_per_round is not None
           and runs_on(ALGORITHMS.get(name), spec, n, ALGORITHMS.get(name).examples[0])]


@pytest.mark.parametrize("name, spec, n", TRAFFIC)
def test_a_round_sends_its_messages_each_with_the_compressors_bits_on_each_link(name, spec, n):
    """Gossip: each message once in the paper's count and a copy (in whole bytes) on each active link; a collective:
    an all-reduce's 2(n − 1)/n of the message, or an all-gather's n − 1 compressed ones. Checked once every link
    has been used (a link's first message may set up its copies); the first round's count on a static graph."""
    cls = ALGORITHMS.get(name)
    topo, problem, comp = make_topology(spec, n), Quadratic(n, D), make_compressor(compressor_of(cls),
                                                                                   contraction=cls.contraction)
    algo = build(name, topo, start(n), comp.spec, cls.examples[0], segments=SEGMENTS)
    on_link, paper, period = 8 * math.ceil(comp.wire_bits(SEGMENTS) / 8), comp.paper_bits(SEGMENTS), topo.period
    for t in range(period + 2):
        traffic = algo.step(problem.grad(algo.x), LR)
        m = traffic.messages
        if t == 0 and not topo.time_varying:
            assert m == (cls.messages_per_round if cls.first_round_messages is None else cls.first_round_messages)
        if t < period:
            continue
        assert m == cls.messages_per_round and traffic.comm_time_s > 0
        if cls.own_compression:  # its own messages: tests/test_powergossip.py and tests/test_powersgd.py count them
            if cls.centralized:  # all-reduces of float32 vectors
                assert traffic.paper_bits > 0
                assert traffic.wire_bits == pytest.approx(2 * (n - 1) / n * traffic.paper_bits)
            else:  # a message on each link, or one broadcast
                assert traffic.wire_bits >= traffic.paper_bits > 0 and traffic.wire_bits_max == traffic.wire_bits
        elif cls.centralized:
            per = (n - 1) if comp.name != "none" else 2 * (n - 1) / n
            assert traffic.wire_bits == pytest.approx(m * per * on_link) and traffic.paper_bits == m * paper
        else:
            assert traffic.wire_bits == m * LINKS[spec] * on_link and traffic.paper_bits == m * paper


KNOBS = [pytest.param(name, knob, id=f"{name}-{knob}") for name in NAMES
         for knob, info in ALGORITHMS.get(name).knobs().items() if "low" in info]


@pytest.mark.parametrize("name, knob", KNOBS)
def test_a_knob_anywhere_inside_its_declared_range_runs(name, knob):
    """Near its low end, in the middle and at its high end (the ranges are (low, high]): the value is taken as
    given, a few rounds of the method stay finite, and each value leads elsewhere (the knob is used). The gradients
    carry a minibatch's error, the same for both of a step's gradients where a method takes two (as the runner
    gives them): DoCoM's β weighs that error and nothing else."""
    cls = ALGORITHMS.get(name)
    low, high = cls.knobs()[knob]["low"], cls.knobs()[knob]["high"]
    topo, problem, ends = make_topology("ring", 8), Quadratic(8, D), []
    for value in (low + 1e-3 * (high - low), (low + high) / 2, high):
        algo = build(name, topo, start(8, identical=False), compressor_of(cls), {**cls.examples[0], knob: value})
        assert getattr(algo.options, knob) == value
        draws = torch.Generator().manual_seed(0)
        for _ in range(5):
            error = 0.1 * torch.randn(algo.x.shape, generator=draws, dtype=algo.x.dtype)
            point = algo.second_gradient_point()
            if point is not None:
                algo.take_second_gradient(problem.grad(point) + error)
            algo.step(problem.grad(algo.x) + error, LR)
        assert torch.isfinite(algo.x).all()
        assert not any(torch.equal(algo.x, x) for x in ends), value
        ends.append(algo.x)


class LeastSquares:
    """Worker i holds f_i(x) = ½‖A_i x − b_i‖² with its own data and its own offset in b_i, so the workers'
    minimisers differ (non-i.i.d.); gradients are exact (deterministic)."""

    def __init__(self, n, d=10, m=20, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.A = torch.randn(n, m, d, generator=g, dtype=torch.float64) / m ** 0.5
        self.b = (torch.randn(n, m, generator=g, dtype=torch.float64)
                  + 3 * torch.randn(n, 1, generator=g, dtype=torch.float64))
        hessian = torch.einsum("nmi,nmj->ij", self.A, self.A)
        self.optimum = torch.linalg.solve(hessian, torch.einsum("nmi,nm->i", self.A, self.b))  # of mean_i f_i

    def grad(self, x):
        residual = torch.einsum("nmd,nd->nm", self.A, x) - self.b
        return torch.einsum("nmd,nm->nd", self.A, residual)


def settle(name, compressor="none", options=None, steps=600, n=8):
    """The method after ``steps`` plain SGD steps of 0.1 on a ring of 8 from 0, and the relative error of its
    farthest worker from the optimum of the mean objective."""
    problem = LeastSquares(n)
    algo = build_with(name, make_topology("ring", n), torch.zeros(n, 10, dtype=torch.float64), compressor, options,
                      local_cfg=LocalStepConfig())
    for _ in range(steps):
        algo.step(problem.grad(algo.x), 0.1)
    return algo, problem, float((algo.x - problem.optimum).norm(dim=1).max() / problem.optimum.norm())


@functools.cache
def dpsgd_bias() -> float:
    algo, problem, error = settle("dpsgd")
    assert float((algo.x.mean(0) - problem.optimum).norm() / problem.optimum.norm()) > 1e-2  # nor its average
    assert abs(error - settle("dpsgd", steps=300)[2]) < 1e-8  # a fixed point
    return error


OPTIMA = [pytest.param(name, compressor, options, id=f"{name}-{compressor}-{options}") for name in NAMES
          for compressor, options in ALGORITHMS.get(name).exact_optimum]


@pytest.mark.parametrize("name, compressor, options", OPTIMA)
def test_on_heterogeneous_least_squares_a_method_reaches_the_optimum_dpsgd_misses(name, compressor, options):
    """Exact gradients, a minimiser per worker, one constant step: D-PSGD settles at a fixed point away from the
    optimum of the mean objective; a method that tracks the mean gradient or corrects by a dual settles at it
    (the correction vanishes only there), exact or compressed as the method declares."""
    cls = ALGORITHMS.get(name)  # the operators of its analysis: contractions, or unbiased ones (CEDAS, LEAD)
    assert cls.contraction or make_compressor(compressor, contraction=False).unbiased
    assert dpsgd_bias() > 0.1
    assert settle(name, compressor, options)[2] < 1e-7


ALONE = [pytest.param(name, k, id=f"{name}-{k}") for name in NAMES
         for k in range(len(ALGORITHMS.get(name).gossip_alone))]


@pytest.mark.parametrize("name, k", ALONE)
def test_gossip_alone_brings_the_models_to_their_average(name, k):
    """No gradient, a ring of 8 from spread models: the average stays where it was (float64 round-off) and the
    spread falls below the declared fraction of the start: exact consensus, or where error feedback stalls it."""
    compressor, options, rounds, fraction = ALGORITHMS.get(name).gossip_alone[k]
    algo = build(name, make_topology("ring", 8), start(8, identical=False), compressor, options)
    mean, spread = algo.x.mean(0), float((algo.x - algo.x.mean(0)).norm())
    for _ in range(rounds):
        assert algo.step(None, LR).messages > 0
    torch.testing.assert_close(algo.x.mean(0), mean, rtol=0, atol=1e-12)
    assert float((algo.x - mean).norm()) < fraction * spread


def refusals(cls, options):
    """What a run may ask of a method: (the ask, its check, whether the method's declarations say it cannot)."""
    lossy, late, away = (parse_faults(f, 8) for f in ({"drop": 0.1}, {"late": 0.1}, {"active": 0.5}))
    return [("lost messages", lambda: cls.check_faults(lossy), cls.fault_rule is None),
            ("late messages", lambda: cls.check_faults(late), cls.late_rule is None),
            ("workers away", lambda: cls.check_faults(away), cls.fault_rule != "reweight"),
            ("a changing graph", lambda: cls.check_topology("one-peer-exp", True, options), cls.fixed_graph or None),
            ("a static graph", lambda: cls.check_topology("ring", False, options), False),
            ("processes", lambda: cls.check_backend("dist"), None)]


@pytest.mark.parametrize("name", NAMES)
def test_what_a_method_declares_it_cannot_run_is_refused_in_one_line_naming_it(name):
    """Faults without a rule for them, a changing graph under a fixed-graph method: refused, in one line that
    names the method; what its declarations allow goes through (None: a refusal of the method's own, e.g.
    PowerGossip's warm start on a changing graph, AD-PSGD's processes)."""
    cls = ALGORITHMS.get(name)
    options = parse_options(cls, {**({"seed": 1} if cls.settings else {}), **cls.examples[0]})
    for ask, check, refused in refusals(cls, options):
        try:
            check()
        except BenchError as err:
            assert refused is not False and "\n" not in str(err) and name in str(err), (ask, str(err))
        else:
            assert not refused, ask


FEEDBACK = [pytest.param(name, options, c, id=f"{name}-{options}-{c}") for name in NAMES
            if ALGORITHMS.get(name).error_feedback for options in ALGORITHMS.get(name).examples
            for c in COMPRESSORS
            if takes(ALGORITHMS.get(name), c) and (c == "none") == ALGORITHMS.get(name).own_compression]


@pytest.mark.parametrize("name, options, compressor", FEEDBACK)
def test_error_feedback_loses_nothing_compression_dropped_it_only_delays_it(name, options, compressor):
    """Plain SGD, heterogeneous workers: all models stay equal and x_T = x_0 − η Σ_t mean(d_t) + mean(e_T), e the
    declared buffer of what is not applied yet (times η when it holds directions; Karimireddy et al. 2019)."""
    cls, problem = ALGORITHMS.get(name), Quadratic(8, D)
    buffer, unit = cls.error_feedback
    algo = build_with(name, make_topology("ring", 8), start(8), compressor, options, LocalStepConfig())
    x0, applied = algo.x.clone(), torch.zeros(D, dtype=torch.float64)
    for _ in range(30):
        grad = problem.grad(algo.x)
        applied += grad.mean(0)
        algo.step(grad, LR)
    late = getattr(algo, buffer).mean(0) * (LR if unit == "gradient" else 1.0)
    assert torch.equal(algo.x, algo.x[:1].expand_as(algo.x))  # one model
    torch.testing.assert_close(algo.x[0], x0[0] - LR * applied + late, rtol=0, atol=1e-10)
    assert getattr(algo, buffer).abs().sum() > 0  # the compressor did drop something


DECAYING = [pytest.param(name, *law, id=f"{name}-{law[0]}") for name in NAMES
            for law in ALGORITHMS.get(name).decaying_optimum]


@pytest.mark.parametrize("name, compressor, options, momentum, tolerance", DECAYING)
def test_under_a_decaying_step_a_method_reaches_the_optimum_of_the_mean_objective(name, compressor, options,
                                                                                  momentum, tolerance):
    """Heterogeneous workers, exact gradients, per-layer messages, η_t = 0.2/(1 + t/50) for 3000 steps: the farthest
    worker ends within the declared relative error of the optimum and still falling (below half its error after
    750 steps), or at float64's floor."""
    problem = Quadratic(8, D, seed=4)
    optimum = (problem.a * problem.c).sum(0) / problem.a.sum()
    algo = build_with(name, make_topology("ring", 8), start(8), compressor, options, LocalStepConfig(momentum=momentum),
                      segments=LAYERS, shapes=SHAPES)
    errors = []
    for t in range(3000):
        algo.step(problem.grad(algo.x), 0.2 / (1 + t / 50))
        errors.append(float((algo.x - optimum).norm(dim=1).max() / optimum.norm()))
    assert errors[-1] < tolerance and (errors[-1] < errors[749] / 2 or errors[-1] < 1e-12), errors[::750]
