"""The ``faults`` setting of a run, checked: a mapping such as

    faults: {drop: 0.05}                                    # each directed link loses 5 % of its messages
    faults: {drop: 0.05, drop_model: gilbert-elliott, burst: 4}   # the same mean rate, in bursts of 4 rounds
    faults: {drop: 0.05, symmetric: true}                   # an edge loses both directions of a round together
    faults: {down: [{edge: [0, 1], rounds: [100, 200]}]}    # the edge 0-1 carries nothing in rounds 100..199
    faults: {straggler: {model: fixed, workers: [3], factor: 4}}    # worker 3 computes 4 times slower
    faults: {straggler: {model: exponential, mean: 0.5}}    # each step, each worker: 1 + Exp(mean 0.5) times
    faults: {active: 0.5}                                   # each round each worker takes part with chance 1/2
    faults: {absent: [{worker: 2, rounds: [100, 300]}]}     # worker 2 is away for rounds 100..299 (churn)
    faults: {pairwise: true}                                # each round one random edge gossips (Boyd et al. 2006)
    faults: {late: 0.1, staleness: 2}                       # 10 % of the messages arrive 2 rounds late

``drop`` is the mean share of messages lost, per directed link and round. Under ``bernoulli`` (the default)
every message is lost on its own with that probability; under ``gilbert-elliott`` each link is a two-state
chain, good (delivers) and bad (loses), that stays bad for ``burst`` rounds on average (p_bad->good =
1/burst), with p_good->bad chosen so that the stationary share of bad rounds is ``drop``. ``symmetric``
makes one draw per undirected edge and round, so the two directions are lost together. ``straggler``
slows workers down: each worker's compute time of a step is the step's time (measured, or compute_time)
times a factor, fixed for the ``workers`` named or 1 + an exponential draw of mean ``mean`` for every worker
and step, and a synchronous round waits for its slowest worker. ``active`` (partial activation) and
``absent`` (churn) take workers out of rounds: an absent worker neither computes nor sends, its state stays
as it was, the messages sent to it are lost, and it comes back with that stale state. ``pairwise`` is randomised
pairwise gossip: each round one undirected edge of the graph, drawn uniformly, takes part (its two workers
compute and send to each other); every other worker sits the round out and sends nothing. ``late`` is the
share of messages, per directed link and round, that arrive ``staleness`` rounds after they were sent
(bounded staleness, in whole rounds >= 0; 0 keeps every message on time); a message is lost or late or on time, never two. Every key has its
range; anything else is one line naming the setting and what it allows (exit 2 where the CLI reads it)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import BenchError

DROP_MODELS = ("bernoulli", "gilbert-elliott")
KEYS = ("drop", "drop_model", "burst", "symmetric", "down", "straggler", "active", "absent", "pairwise", "late",
        "staleness")
STRAGGLER_MODELS = ("fixed", "exponential")


@dataclass(frozen=True)
class Outage:
    """The undirected edge ``a``-``b`` delivers nothing in rounds ``start`` <= t < ``stop``."""
    a: int
    b: int
    start: int
    stop: int


@dataclass(frozen=True)
class Away:
    """Worker ``worker`` takes no part in rounds ``start`` <= t < ``stop``."""
    worker: int
    start: int
    stop: int


@dataclass(frozen=True)
class Straggler:
    """``fixed``: the ``workers`` take ``factor`` times the step's compute time; ``exponential``: every worker
    takes 1 + Exp(``mean``) times it, drawn anew each step."""
    model: str
    workers: tuple[int, ...] = ()
    factor: float = 1.0
    mean: float = 0.0

    def to_dict(self) -> dict:
        if self.model == "fixed":
            return {"model": "fixed", "workers": list(self.workers), "factor": self.factor}
        return {"model": "exponential", "mean": self.mean}


@dataclass(frozen=True)
class FaultSpec:
    drop: float = 0.0
    drop_model: str = "bernoulli"
    burst: float = 1.0
    symmetric: bool = False
    down: tuple[Outage, ...] = ()
    straggler: Straggler | None = None
    active: float = 1.0
    absent: tuple[Away, ...] = ()
    pairwise: bool = False
    late: float = 0.0
    staleness: int = 1

    @property
    def away(self) -> bool:
        """Whether some worker sits out some round (partial activation, churn, pairwise gossip)."""
        return self.active < 1 or bool(self.absent) or self.pairwise

    @property
    def loses(self) -> bool:
        """Whether some message is lost or late (what a method needs a rule for): dropped, late, or to or from a
        worker away."""
        return self.drop > 0 or bool(self.down) or self.away or self.delays

    @property
    def delays(self) -> bool:
        """Whether some message arrives late."""
        return self.late > 0 and self.staleness > 0

    @property
    def present(self) -> bool:
        """Whether the network is other than perfect: messages lost or workers slowed."""
        return self.loses or self.straggler is not None

    @property
    def p_good_to_bad(self) -> float:
        """Gilbert-Elliott's chance of entering a burst, for a stationary bad share of ``drop``."""
        p_bg = 1.0 / self.burst
        return min(1.0, self.drop * p_bg / (1.0 - self.drop)) if self.drop < 1 else 1.0

    def to_dict(self) -> dict:
        out = {"drop": self.drop, "drop_model": self.drop_model, "symmetric": self.symmetric}
        if self.drop_model == "gilbert-elliott":
            out["burst"] = self.burst
        if self.down:
            out["down"] = [{"edge": [o.a, o.b], "rounds": [o.start, o.stop]} for o in self.down]
        if self.straggler is not None:
            out["straggler"] = self.straggler.to_dict()
        if self.active < 1:
            out["active"] = self.active
        if self.absent:
            out["absent"] = [{"worker": a.worker, "rounds": [a.start, a.stop]} for a in self.absent]
        if self.pairwise:
            out["pairwise"] = True
        if self.delays:
            out.update(late=self.late, staleness=self.staleness)
        return out


MAX_STALENESS = 1000  # rounds a late message is held (1e20 ended in a TypeError deep in the schedule)


def _fail(key: str, value, allowed: str):
    raise BenchError(f"faults.{key}={value!r:.60}: {allowed}")


def _number(key: str, value, low: float, high: float, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        _fail(key, value, allowed)
    return float(value)


def _outage(item, n: int | None) -> Outage:
    allowed = "each entry of faults.down is {edge: [i, j], rounds: [start, stop]} with 0 <= start < stop"
    if not isinstance(item, dict) or set(item) != {"edge", "rounds"}:
        _fail("down", item, allowed)
    edge, rounds = item["edge"], item["rounds"]
    whole = (lambda v: isinstance(v, int) and not isinstance(v, bool))
    if not (isinstance(edge, list) and len(edge) == 2 and all(map(whole, edge)) and edge[0] != edge[1]
            and min(edge) >= 0 and (n is None or max(edge) < n)):
        _fail("down", item, allowed + (f"; i != j are workers 0..{n - 1}" if n else "; i != j are workers"))
    if not (isinstance(rounds, list) and len(rounds) == 2 and all(map(whole, rounds)) and 0 <= rounds[0] < rounds[1]):
        _fail("down", item, allowed)
    return Outage(min(edge), max(edge), rounds[0], rounds[1])


def parse_faults(value, n: int | None = None) -> FaultSpec:
    """The FaultSpec of a ``faults`` setting ({} or None: a perfect network); ``n`` checks the workers named."""
    if value is None or value == {}:
        return FaultSpec()
    if not isinstance(value, dict):
        raise BenchError(f"faults={value!r:.60}: a mapping, e.g. {{drop: 0.05}} (keys: {', '.join(KEYS)})")
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise BenchError(f"faults.{unknown[0]}: unknown; the keys are {', '.join(KEYS)}")
    drop = _number("drop", value.get("drop", 0.0), 0.0, 1.0, "a probability in [0, 1]")
    model = value.get("drop_model", "bernoulli")
    if model not in DROP_MODELS:
        _fail("drop_model", model, f"one of {', '.join(DROP_MODELS)}")
    burst = value.get("burst", 1.0)
    if "burst" in value and model != "gilbert-elliott":
        _fail("burst", burst, "goes with drop_model=gilbert-elliott (the mean length of a loss burst, in rounds)")
    burst = _number("burst", burst, 1.0, 1e9, "the mean length of a loss burst in rounds, >= 1")
    if model == "gilbert-elliott" and drop >= 1:
        _fail("drop", drop, "below 1 under gilbert-elliott (a chain that is always bad has no bursts)")
    symmetric = value.get("symmetric", False)
    if not isinstance(symmetric, bool):
        _fail("symmetric", symmetric, "true or false")
    down = value.get("down", [])
    if not isinstance(down, list):
        _fail("down", down, "a list of {edge: [i, j], rounds: [start, stop]}")
    straggler = _straggler(value["straggler"], n) if "straggler" in value else None
    active = _number("active", value.get("active", 1.0), 1e-12, 1.0,
                     "the chance that a worker takes part in a round, in (0, 1]")
    if n is not None and active * n < 1:
        _fail("active", value["active"], f"at least 1/n = {1 / n:.3g}: fewer would leave no worker in most rounds")
    absent = value.get("absent", [])
    if not isinstance(absent, list):
        _fail("absent", absent, "a list of {worker: i, rounds: [start, stop]}")
    pairwise = value.get("pairwise", False)
    if not isinstance(pairwise, bool):
        _fail("pairwise", pairwise, "true or false (one random edge takes part in each round)")
    if pairwise and "active" in value:
        _fail("pairwise", pairwise, "goes without faults.active (pairwise gossip already says who takes part)")
    if pairwise and n is not None and n < 2:
        _fail("pairwise", pairwise, "needs at least 2 workers")
    late = _number("late", value.get("late", 0.0), 0.0, 1.0, "the share of messages that arrive late, in [0, 1]")
    staleness = value.get("staleness", 1)
    if "staleness" in value and late == 0:
        _fail("staleness", staleness, "goes with faults.late > 0 (how many rounds a late message is late)")
    if isinstance(staleness, bool) or not isinstance(staleness, int) or not 0 <= staleness <= MAX_STALENESS:
        _fail("staleness", staleness, f"a whole number of rounds in 0..{MAX_STALENESS} (0: the late messages are on "
              "time after all; each late message is held that many rounds)")
    return FaultSpec(drop, model, burst, symmetric, tuple(_outage(item, n) for item in down), straggler,
                     active, tuple(_away(item, n) for item in absent), pairwise, late, staleness)


def _away(item, n: int | None) -> Away:
    allowed = "each entry of faults.absent is {worker: i, rounds: [start, stop]} with 0 <= start < stop"
    whole = (lambda v: isinstance(v, int) and not isinstance(v, bool))
    if not isinstance(item, dict) or set(item) != {"worker", "rounds"}:
        _fail("absent", item, allowed)
    worker, rounds = item["worker"], item["rounds"]
    if not (whole(worker) and 0 <= worker and (n is None or worker < n)):
        _fail("absent", item, allowed + (f"; i is a worker 0..{n - 1}" if n else ""))
    if not (isinstance(rounds, list) and len(rounds) == 2 and all(map(whole, rounds)) and 0 <= rounds[0] < rounds[1]):
        _fail("absent", item, allowed)
    return Away(worker, rounds[0], rounds[1])


def _straggler(value, n: int | None) -> Straggler:
    allowed = ("{model: fixed, workers: [i, ...], factor: F >= 1} or {model: exponential, mean: M > 0}")
    if not isinstance(value, dict) or value.get("model") not in STRAGGLER_MODELS:
        _fail("straggler", value, allowed)
    if value["model"] == "fixed":
        if set(value) != {"model", "workers", "factor"}:
            _fail("straggler", value, allowed)
        workers = value["workers"]
        if not (isinstance(workers, list) and workers and all(isinstance(w, int) and not isinstance(w, bool)
                                                              and 0 <= w and (n is None or w < n) for w in workers)):
            _fail("straggler.workers", workers, "a non-empty list of workers" + (f" 0..{n - 1}" if n else ""))
        factor = _number("straggler.factor", value["factor"], 1.0, 1e6, "a slow-down factor >= 1")
        return Straggler("fixed", tuple(sorted(set(workers))), factor)
    if set(value) != {"model", "mean"}:
        _fail("straggler", value, allowed)
    return Straggler("exponential", mean=_number("straggler.mean", value["mean"], 1e-9, 1e6,
                                                 "the mean extra share of a step's time, > 0"))
