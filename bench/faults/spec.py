"""The ``faults`` setting of a run, checked: a mapping such as

    faults: {drop: 0.05}                                    # each directed link loses 5 % of its messages
    faults: {drop: 0.05, drop_model: gilbert-elliott, burst: 4}   # the same mean rate, in bursts of 4 rounds
    faults: {drop: 0.05, symmetric: true}                   # an edge loses both directions of a round together
    faults: {down: [{edge: [0, 1], rounds: [100, 200]}]}    # the edge 0-1 carries nothing in rounds 100..199

``drop`` is the mean share of messages lost, per directed link and round. Under ``bernoulli`` (the default)
every message is lost on its own with that probability; under ``gilbert-elliott`` each link is a two-state
chain, good (delivers) and bad (loses), that stays bad for ``burst`` rounds on average (p_bad->good =
1/burst), with p_good->bad chosen so that the stationary share of bad rounds is ``drop``. ``symmetric``
makes one draw per undirected edge and round, so the two directions are lost together. Every key has its
range; anything else is one line naming the setting and what it allows (exit 2 where the CLI reads it)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import BenchError

DROP_MODELS = ("bernoulli", "gilbert-elliott")
KEYS = ("drop", "drop_model", "burst", "symmetric", "down")


@dataclass(frozen=True)
class Outage:
    """The undirected edge ``a``-``b`` delivers nothing in rounds ``start`` <= t < ``stop``."""
    a: int
    b: int
    start: int
    stop: int


@dataclass(frozen=True)
class FaultSpec:
    drop: float = 0.0
    drop_model: str = "bernoulli"
    burst: float = 1.0
    symmetric: bool = False
    down: tuple[Outage, ...] = ()

    @property
    def any(self) -> bool:
        return self.drop > 0 or bool(self.down)

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
        return out


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
    return FaultSpec(drop, model, burst, symmetric, tuple(_outage(item, n) for item in down))
