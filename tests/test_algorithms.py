"""Mathematical identities of the algorithms, in float64, on the simulated communicator."""

import pytest
import torch

from bench.algorithms import ALGORITHMS, LocalStep, LocalStepConfig, make_algorithm, parse_options
from bench.comm import SimulatedCommunicator
from bench.compressors import make_compressor
from bench.errors import BenchError
from bench.faults import FaultSchedule, parse_faults
from bench.topology import make_topology

D = 40
STEPS = 25
LR = 0.05


class Quadratic:
    """f_i(x) = ½ a_i ‖x − c_i‖²: worker-specific gradients that depend on the iterate."""

    def __init__(self, n, d, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.a = (0.5 + torch.rand(n, 1, generator=g, dtype=torch.float64))
        self.c = torch.randn(n, d, generator=g, dtype=torch.float64)

    def grad(self, x):
        return self.a * (x - self.c)


def start(n, d=D, identical=True, seed=1):
    g = torch.Generator().manual_seed(seed)
    if identical:
        return torch.randn(1, d, generator=g, dtype=torch.float64).repeat(n, 1)
    return torch.randn(n, d, generator=g, dtype=torch.float64)


def build(name, topo, x0, compressor="none", options=None, local_cfg=None, seed=3, faults=None, segments=None,
          shapes=None, network=None):
    """The one harness of the method tests: ``name`` on the simulated communicator of ``topo`` (``faults``: the
    network's, as `bench run` takes them), with the run settings it reads handed in beside its options (AD-PSGD:
    the parsed faults, seed 1), float64 as given in ``x0``."""
    cls = ALGORITHMS.get(name)
    spec = parse_faults(faults, topo.n) if faults else None
    comm = SimulatedCommunicator(topo, network, FaultSchedule(spec, topo.link_union(), 1) if faults else None)
    settings = {"faults": spec, "seed": 1}
    return make_algorithm(name, x0, comm, compressor=make_compressor(compressor, contraction=cls.contraction),
                          local=LocalStep(local_cfg or LocalStepConfig(momentum=0.9, nesterov=True, weight_decay=1e-2)),
                          options={**{key: settings[key] for key in cls.settings}, **(options or {})},
                          generator=torch.Generator().manual_seed(seed), segments=segments, shapes=shapes)


def written_out(name, compressor="none", options=None, n=6, d=D, local_cfg=None, **kwargs):
    """Where a reference written out by hand starts: ``name`` on a ring of ``n`` from spread models (plain SGD steps
    unless ``local_cfg``), its problem, a copy of x⁰, W in float64, and Q: the method's operator drawing what the
    method's generator draws."""
    topo = make_topology("ring", n)
    problem, x0 = Quadratic(n, d), start(n, d, identical=False)
    algo = build(name, topo, x0, compressor, options, local_cfg or LocalStepConfig(), **kwargs)
    twin = make_compressor(compressor, contraction=ALGORITHMS.get(name).contraction)
    draws, W = torch.Generator().manual_seed(3), torch.tensor(topo.W, dtype=torch.float64)  # build's seed
    return algo, problem, x0.clone(), W, lambda z: twin.compress(z, draws).values


def assert_agrees(algo, atol=1e-12, **state):
    """The method's ``state`` (attribute name: the reference's value) to ``atol``, each named where it misses."""
    for key, value in state.items():
        torch.testing.assert_close(getattr(algo, key), value, rtol=0, atol=atol, msg=key)


def runs_on(cls, spec: str, n: int, options: dict) -> bool:
    """Whether the method takes the graph under these options (a method may refuse a changing graph)."""
    try:
        cls.check_topology(spec, make_topology(spec, n).time_varying, parse_options(cls, options))
    except BenchError:
        return False
    return True


def trajectory(algo, problem, steps=STEPS, lr=LR):
    xs = []
    for _ in range(steps):
        algo.step(problem.grad(algo.x), lr)
        xs.append(algo.x.clone())
    return torch.stack(xs)


TOPOLOGIES = [("ring", 8), ("torus", 9), ("social", 32), ("erdos-renyi:0.4", 10)]


@pytest.mark.parametrize("compressor", ["sign", "qsgd:4", "top:0.1", "none"])
@pytest.mark.parametrize("spec,n", [("ring", 8), ("torus", 9), ("social", 32)])
def test_choco_round_gives_the_textbook_rounds_bits(compressor, spec, n):
    """Choco's round as the simulator runs it (q = Q(x − x̂) over layer segments, x̂ += q, u += (W − I) q,
    x += γ u; sign's and none's q written over x − x̂): over three rounds the iterates and copies are bit for bit
    the textbook round's (float32, the runs' dtype)."""
    from bench.comm import Mixer

    topo, segments = make_topology(spec, n), [37, 50, 13]
    x0 = torch.randn(n, sum(segments), generator=torch.Generator().manual_seed(n))
    comp = make_compressor(compressor, contraction=True)
    # the textbook round, every pass whole
    x, x_hat, u = x0.clone(), torch.zeros_like(x0), torch.zeros_like(x0)
    gen, mixer = torch.Generator().manual_seed(3), Mixer(topo.W, topo.grid_shape)
    expected = []
    for _ in range(3):
        q = comp.compress(x - x_hat, gen, segments).values
        x_hat += q
        mixer.accumulate(u, q, self_shift=-1.0)
        x.add_(u, alpha=0.4)
        expected.append((x.clone(), x_hat.clone()))
    algo = make_algorithm("choco", x0, SimulatedCommunicator(topo), compressor=comp, options={"gamma": 0.4},
                          generator=torch.Generator().manual_seed(3), segments=segments)
    for want_x, want_hat in expected:
        algo.step(None, 0.0)
        assert torch.equal(algo.x, want_x) and torch.equal(algo.x_hat, want_hat)


# where the average of the models goes, for every method: tests/test_keeping_the_average.py; a round's messages and
# bits: tests/test_laws.py; their time on the network model: tests/test_comm.py


EXAMPLES = [(name, opts) for name in ALGORITHMS.names() for opts in ALGORITHMS.get(name).examples]


def example(name, opts, n=8, seed=1, spec="ring"):
    """An example of the method on a ring of ``n`` (or ``spec``), with top-20 % where it compresses."""
    cls = ALGORITHMS.get(name)
    comp = "top:0.2" if cls.compresses and not cls.own_compression else "none"
    return build(name, make_topology(spec, n), start(n, seed=seed), comp, opts)


@pytest.mark.parametrize("name, opts, spec", [pytest.param(name, opts, spec, id=f"{name}-{opts}-{spec}")
                                              for name, opts in EXAMPLES for spec in ("ring", "one-peer-exp")
                                              if runs_on(ALGORITHMS.get(name), spec, 8, opts)])
def test_state_dict_round_trip_continues_identically(name, opts, spec):
    """On a static graph and a time-varying one (copies per link, their counts and first-use flags), the round
    counter restored as the runner restores it (5: not a multiple of one-peer-exp's period 3)."""
    problem, a = Quadratic(8, D), example(name, opts, spec=spec)
    trajectory(a, problem, steps=5)
    saved = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in a.state_dict().items() if k != "local"}
    saved["local"] = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in a.state_dict()["local"].items()}
    rest_a = trajectory(a, problem, steps=5)
    b = example(name, opts, seed=99, spec=spec)
    b.comm.round = 5
    b.load_state_dict(saved)
    torch.testing.assert_close(trajectory(b, problem, steps=5), rest_a, rtol=0, atol=0)


@pytest.mark.parametrize("name,opts", EXAMPLES)
def test_a_round_started_before_its_gradient_gives_the_same_bits_and_traffic(name, opts):
    """The runner calls ``start_round`` before the gradients (D-PSGD's paper order posts its gossip there); a
    round driven that way equals ``step`` alone, bit for bit, traffic included, on every method."""
    problem, plain, started = Quadratic(8, D), example(name, opts), example(name, opts)
    for _ in range(4):
        first = plain.step(problem.grad(plain.gradient_point()), LR)
        started.start_round()
        second = started.step(problem.grad(started.gradient_point()), LR)
        assert torch.equal(plain.x, started.x)
        assert (first.wire_bits, first.paper_bits, first.messages) == (second.wire_bits, second.paper_bits,
                                                                       second.messages)


def _fresh_direction(cfg, mask, m, x, g):
    """The local step written with a fresh tensor per operation (the form the reused buffers must match)."""
    d = g.clone()
    if cfg.weight_decay:
        d.add_(x if mask is None else x * mask, alpha=cfg.weight_decay)
    if cfg.momentum == 0.0:
        return d, m
    m = (torch.zeros_like(d) if m is None else m).mul_(cfg.momentum).add_(d)
    return (d.add_(m, alpha=cfg.momentum) if cfg.nesterov else m.clone()), m


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True)])
@pytest.mark.parametrize("mask", ["none", "ones", "some"])
def test_the_local_step_reuses_its_buffers_and_gives_the_fresh_tensors_bits(momentum, nesterov, mask):
    """LocalStep writes the direction into a buffer it reuses (valid until its next call) and drops a mask of all
    ones: bit for bit the fresh-tensor form, step after step, and a direction handed out is not the gradient nor
    the momentum buffer."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(5, 13, generator=g)
    masks = {"none": None, "ones": torch.ones(13), "some": (torch.rand(13, generator=g) > 0.3).float()}
    cfg = LocalStepConfig(momentum=momentum, nesterov=nesterov, weight_decay=1e-2)
    step, m = LocalStep(cfg, decay_mask=masks[mask]), None
    assert (step.decay_mask is None) == (mask != "some")
    for _ in range(4):
        grad = torch.randn(5, 13, generator=g)
        kept = grad.clone()
        d = step.direction(x, grad)
        expected, m = _fresh_direction(cfg, masks[mask], m, x, grad)
        assert torch.equal(d, expected) and torch.equal(grad, kept)
        assert d.data_ptr() not in (grad.data_ptr(), x.data_ptr()) and (
            step.momentum_buffer is None or d.data_ptr() != step.momentum_buffer.data_ptr())
        x = x - 0.1 * d
    with pytest.raises(BenchError, match="momentum"):
        LocalStepConfig(momentum=1.0)


@pytest.mark.parametrize("compressor", ["top:0.2", "rand:0.2"])
def test_ecd_with_a_sparsifier_equals_per_neighbour_estimates(compressor):
    """The authors' bookkeeping, written out: every worker i holds an estimate of each neighbour j
    (and of itself) and moves it only where j sent (y_j ← (1 − 2/t) y_j + (2/t) z_j there, every other
    coordinate untouched); s_i = Σ_j w_ij ŷ_ij. The module's single y per worker and its sent change must give the
    same models, step by step."""
    n, lr = 6, 0.1
    algo, problem, x0, W, _ = written_out("ecd", compressor, d=10)
    twin = make_compressor(compressor, contraction=ALGORITHMS.get("ecd").contraction)
    gen = torch.Generator().manual_seed(3)  # the same draws as the module's generator
    est = {(i, j): x0[j].clone() for i in range(n) for j in range(n) if W[i, j] > 0}
    x = x0.clone()
    s = W @ x0
    for t in range(1, 6):
        x_next = s - lr * problem.grad(x)
        z = (1 - t / 2) * x + (t / 2) * x_next
        q = twin.compress(z, gen)
        sent = twin.support(q)
        for (i, j), e in est.items():
            e[sent[j]] = (1 - 2 / t) * e[sent[j]] + (2 / t) * q.values[j, sent[j]]
        s = torch.stack([sum(W[i, j] * est[i, j] for j in range(n) if W[i, j] > 0) for i in range(n)])
        x = x_next
        algo.step(problem.grad(algo.x), lr)
        assert_agrees(algo, 1e-10, x=x, s=s)


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_every_algorithm_says_what_the_suite_needs_to_know(name):
    """Label, settings and properties live on the class (nothing else branches on the name), and what
    the class says is consistent: its settings are `bench run` settings and fields of its options."""
    import dataclasses

    from bench.compressors import make_compressor
    from bench.run.config import KEYS

    cls = ALGORITHMS.get(name)
    info = cls.describe()
    assert info["name"] == name and info["label"] and set(info) == {
        "name", "label", "compresses", "contraction", "consensus_step", "centralized", "own_compression",
        "consensus_slope", "headline", "knobs"}
    fields = {f.name for f in dataclasses.fields(cls.Options)}
    assert set(cls.settings) <= set(KEYS) and set(cls.settings) <= fields
    assert set(info["knobs"]) == fields  # every option is declared with its default
    assert not cls.consensus_step or info["knobs"]["gamma"]["tune"]  # a consensus step is the method's knob
    # QSGD takes the form the class asks for: rescaled (a contraction) or unbiased
    assert make_compressor("qsgd:4", contraction=cls.contraction).unbiased is not cls.contraction
    for opts in cls.examples:
        parse_options(cls, opts)
