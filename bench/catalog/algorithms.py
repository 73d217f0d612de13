"""The algorithms as the rest of the suite sees them before any tensor exists: name, label, what they do with
a compressor, a graph and a network, and their own options. bench/algorithms/<name>.py adds the maths to each
(``class Choco(catalog.Choco, Algorithm)``); the run, the pipeline's checks and the analysis read these."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Literal

from ..errors import BenchError
from ..registry import Registry

METHODS: Registry[type["Method"]] = Registry("algorithm")


def register(cls: type["Method"]) -> type["Method"]:
    METHODS.register(cls.name)(cls)
    return cls


@dataclass(frozen=True)
class NoOptions:
    pass


class Method:
    """What the rest of the suite needs to know of a method is said here, by its class, and written into
    run.json (``describe``): nothing else branches on an algorithm's name."""

    name: ClassVar[str]
    label: ClassVar[str]  # its name in tables and figures
    Options: ClassVar[type] = NoOptions
    compresses: ClassVar[bool] = True  # False: sends exact models, only the `none` compressor makes sense
    contraction: ClassVar[bool] = False  # its analysis needs a δ-contraction (QSGD then takes its rescaled form)
    consensus_step: ClassVar[bool] = False  # has Choco's consensus step γ (tuned on the consensus problem when auto)
    centralized: ClassVar[bool] = False  # every worker applies the same update (all models equal; no graph used)
    # compresses by its own scheme (e.g. PowerSGD's low rank): --compressor stays `none`
    own_compression: ClassVar[bool] = False
    # keeps running sums of (W − I)·(public copies), valid only while W stays the same: refused on a
    # time-varying graph (one-peer-exp), where it would not reach consensus
    fixed_graph: ClassVar[bool] = False
    # the `bench run` settings that are this method's options (handed to Options by the same name)
    settings: ClassVar[tuple[str, ...]] = ()
    # what it does with a message lost on a link (the run's faults): "reweight" (the receiver keeps the weight
    # of what did not arrive on its own model); None: no rule yet, so runs with faults are refused
    fault_rule: ClassVar[str | None] = None
    # what it does with a message that arrives rounds late (faults.late): "stale" (the receiver mixes with the
    # newest copy it has heard), "ack" (a per-link copy takes the message at both ends when it arrives)
    late_rule: ClassVar[str | None] = None

    @classmethod
    def check_backend(cls, backend: str) -> None:
        """One line when this method cannot run under ``backend`` (sim or dist); every method runs in both."""

    @classmethod
    def check_faults(cls, spec) -> None:
        """One line when this method has no rule for lost messages and ``spec`` (a FaultSpec) loses some."""
        if spec.delays and cls.late_rule is None:
            raise BenchError(f"faults.late: algorithm {cls.name!r} has no rule for a late message yet; methods "
                             "that take late messages: " + ", ".join(
                                 n for n in METHODS.names() if METHODS.get(n).late_rule is not None))
        if spec.away and spec.pairwise and cls.fault_rule != "reweight":
            raise BenchError(f"faults.pairwise: algorithm {cls.name!r} cannot gossip one edge a round (it "
                             "cannot sit the other workers out); methods that can: " + ", ".join(
                                 n for n in METHODS.names() if METHODS.get(n).fault_rule == "reweight"))
        if spec.away and cls.fault_rule is not None and cls.fault_rule != "reweight":
            raise BenchError(f"faults.active/absent: algorithm {cls.name!r} cannot sit a worker out yet (its "
                             "rule keeps copies per link, which a frozen worker would leave behind); methods "
                             "that take workers away: " + ", ".join(
                                 n for n in METHODS.names() if METHODS.get(n).fault_rule == "reweight"))
        if not spec.loses or cls.fault_rule is not None:
            return
        takes = ", ".join(n for n in METHODS.names() if METHODS.get(n).fault_rule is not None)
        why = ("a collective has no partial form" if cls.centralized else
               "its public copies or per-link state would split between sender and receiver")
        raise BenchError(f"faults: algorithm {cls.name!r} has no rule for a lost message yet ({why}); "
                         f"methods that take faults: {takes}")

    @classmethod
    def check_compressor(cls, compressor) -> None:
        """One line when this algorithm cannot use ``compressor`` (an operator or its parsed spec,
        catalog.compressors); the pipeline asks before it submits a run."""
        if cls.own_compression and compressor.name != "none":
            raise BenchError(f"algorithm {cls.name!r} compresses by its own scheme (see its options); "
                             f"use --compressor none (got {compressor.spec!r})")
        if not cls.compresses and compressor.name != "none":
            compressing = ", ".join(n for n in METHODS.names()
                                    if METHODS.get(n).compresses and not METHODS.get(n).own_compression)
            raise BenchError(
                f"algorithm {cls.name!r} sends exact models; use --compressor none "
                f"(got {compressor.spec!r}) or one of {compressing}"
            )

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        """One line when this algorithm (with its parsed ``options``, when known) cannot run on the graph ``name``
        (a fixed-graph method on a time-varying one)."""
        if cls.fixed_graph and time_varying:
            usable = ", ".join(n for n in METHODS.names() if not METHODS.get(n).fixed_graph)
            raise BenchError(f"algorithm {cls.name!r} keeps (W − I)·x̂ up to date round by round, which holds only "
                             f"for a fixed graph; {name!r} changes W every round: use one of {usable}")

    @classmethod
    def check_network(cls, network) -> None:
        """One line when this algorithm cannot run on ``network``: a collective on a broadcast medium (a ring
        all-reduce forwards a different chunk on each hop, which one shared transmission cannot carry)."""
        if cls.centralized and network.broadcast:
            gossiping = ", ".join(n for n in METHODS.names() if not METHODS.get(n).centralized)
            raise BenchError(f"network medium=broadcast (in {network.name!r}) carries gossip, not the collectives "
                             f"algorithm {cls.name!r} uses; use medium=links or one of {gossiping}")

    @classmethod
    def describe(cls) -> dict:
        return {"name": cls.name, "label": cls.label, "compresses": cls.compresses, "contraction": cls.contraction,
                "consensus_step": cls.consensus_step, "centralized": cls.centralized,
                "own_compression": cls.own_compression}


def parse_options(cls: type[Method], raw: dict | None):
    """Build an algorithm's frozen options from a dict, rejecting unknown keys with one line."""
    raw = dict(raw or {})
    known = {f.name: f for f in fields(cls.Options)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise BenchError(f"unknown option {unknown[0]!r} for algorithm {cls.name!r}; allowed: {allowed}")
    return cls.Options(**raw)


def _gamma(method: str, gamma, spell=repr) -> None:
    if not 0.0 < float(gamma) <= 1.0:
        raise BenchError(f"{method} gamma={spell(gamma)} must be in (0, 1]")


def _rank(method: str, rank) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise BenchError(f"{method} rank={rank!r} must be a positive integer")


def _flag(where: str, value) -> None:
    if not isinstance(value, bool):
        raise BenchError(f"{where}={value!r} must be true or false")


def _order(method: str, order) -> None:
    if order not in ("paper", "code"):
        raise BenchError(f"{method} order={order!r}; allowed: paper, code")


# -- the options of each method ---------------------------------------------------------------------
@dataclass(frozen=True)
class ADPSGDOptions:
    # the run's `faults` and `seed` settings, handed over by name (Method.settings): the stragglers pace its
    # workers and the seed draws their neighbours (bench/faults/events.py); nothing else of faults is read
    faults: dict | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        from ..faults.spec import parse_faults

        parse_faults(self.faults)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise BenchError(f"adpsgd seed={self.seed!r} must be an integer >= 0")


@dataclass(frozen=True)
class BEEROptions:
    gamma: float = 1.0  # mixing step γ in (0, 1] of both gossips (the paper's γ)

    def __post_init__(self) -> None:
        _gamma("beer", self.gamma)


@dataclass(frozen=True)
class ChocoOptions:
    gamma: float = 1.0  # consensus step size γ in (0, 1]; tune it (bench tune-gamma) for compression
    order: Literal["paper", "code"] = "paper"  # see bench/algorithms/choco.py

    def __post_init__(self) -> None:
        _gamma("choco", self.gamma, spell=str)
        _order("choco", self.order)


@dataclass(frozen=True)
class DeepSqueezeOptions:
    gamma: float = 1.0  # consensus step γ in (0, 1]; the authors' consensus_stepsize

    def __post_init__(self) -> None:
        _gamma("deepsqueeze", self.gamma)


@dataclass(frozen=True)
class DGCOptions:
    factor_masking: bool = True  # zero the momentum u where v was sent (the paper's momentum factor masking)

    def __post_init__(self) -> None:
        _flag("dgc factor_masking", self.factor_masking)


@dataclass(frozen=True)
class DPSGDOptions:
    order: Literal["paper", "code"] = "paper"  # gossip-then-step (paper) or step-then-gossip (code)

    def __post_init__(self) -> None:
        _order("dpsgd", self.order)


@dataclass(frozen=True)
class PowerGossipOptions:
    rank: int = 1  # r, the rank of each layer's approximation of the model differences (the authors' default 1)
    gamma: float = 1.0  # consensus step (the authors' diffusion_rate)
    # True: a basis per edge, warm-started from its last difference (published); False: one shared random basis
    warm_start: bool = True

    def __post_init__(self) -> None:
        _rank("powergossip", self.rank)
        _gamma("powergossip", self.gamma)
        _flag("powergossip warm_start", self.warm_start)


@dataclass(frozen=True)
class PowerSGDOptions:
    rank: int = 2  # R, the rank of each layer's approximation

    def __post_init__(self) -> None:
        _rank("powersgd", self.rank)


# -- the methods, in the order of their names (how `known: ...` lists them) ----------------------------
@register
class ADPSGD(Method):
    name, label = "adpsgd", "AD-PSGD"
    compresses = False
    fault_rule = "ack"  # an averaging whose either message is lost is skipped at both ends: the average is kept

    @classmethod
    def check_faults(cls, spec) -> None:
        if spec.away:
            raise BenchError("faults.active/absent/pairwise: algorithm 'adpsgd' has its own waves of who takes part "
                             "(the straggler model's event times); use faults.straggler instead")
        super().check_faults(spec)
    settings = ("faults", "seed")
    Options = ADPSGDOptions

    @classmethod
    def check_backend(cls, backend: str) -> None:
        if backend != "sim":
            raise BenchError("algorithm 'adpsgd' runs in the simulator only (--backend sim): its event order is "
                             "the straggler model's, not that of real processes")

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        super().check_topology(name, time_varying, options)
        if time_varying:
            raise BenchError(f"algorithm 'adpsgd' averages with a neighbour drawn from a fixed graph at each event, "
                             f"but topology {name!r} changes its links every round: use a static graph")


@register
class AllReduce(Method):
    name, label = "allreduce", "all-reduce"
    compresses = False
    centralized = True


@register
class BEER(Method):
    name, label = "beer", "BEER"
    # the paper's compression operators are contractions (biased, E‖Q(x) − x‖² ≤ (1 − α)‖x‖²)
    contraction = True
    consensus_step = True
    settings = ("gamma",)
    Options = BEEROptions
    fault_rule = "ack"  # h and g per link, a lost message added at neither end: mean(v) tracks mean(d)
    late_rule = "ack"  # a late q of h or g added at both ends when it lands


@register
class Choco(Method):
    name, label = "choco", "Choco-SGD"
    contraction = True
    consensus_step = True
    settings = ("gamma", "order")
    Options = ChocoOptions
    fault_rule = "ack"  # copies per link, a lost message added at neither end: the average is kept
    late_rule = "ack"  # a late message added at both ends when it arrives


@register
class DCD(Method):
    name, label = "dcd", "DCD-PSGD"


@register
class DeepSqueeze(Method):
    name, label = "deepsqueeze", "DeepSqueeze"
    contraction = True  # the analysis bounds the compression error relative to its input
    consensus_step = True
    settings = ("gamma",)
    Options = DeepSqueezeOptions
    # the gossip of c reweighted (D-PSGD's rule); no copies: the average is kept when losses are symmetric
    fault_rule = "reweight"


@register
class DGC(Method):
    name, label = "dgc", "DGC"
    centralized = True
    Options = DGCOptions

    @classmethod
    def check_compressor(cls, compressor) -> None:
        # the accumulation v is zeroed where sent: the operator must send coordinates of v as they are
        if not compressor.sparse or compressor.unbiased:
            raise BenchError(f"algorithm 'dgc' sends the largest coordinates of its accumulated step; use a "
                             f"biased sparsifier such as top:0.01 or rand:0.01 (got {compressor.spec!r})")


@register
class DPSGD(Method):
    name, label = "dpsgd", "D-PSGD"
    settings = ("order",)
    fault_rule = "reweight"  # bench/faults/reweight.py: the average is kept when losses are symmetric
    late_rule = "stale"  # the newest model heard per in-link (then a lost message leaves the older copy too)
    Options = DPSGDOptions
    compresses = False


@register
class ECD(Method):
    name, label = "ecd", "ECD-PSGD"


@register
class ErrorFeedback(Method):
    name, label = "ef", "EF-SGD"
    centralized = True


@register
class PowerGossip(Method):
    name, label = "powergossip", "PowerGossip"
    own_compression = True  # low rank, by itself: the --compressor stays `none`
    consensus_step = True
    settings = ("gamma",)
    Options = PowerGossipOptions

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        super().check_topology(name, time_varying, options)
        if time_varying and (options is None or options.warm_start):
            raise BenchError(f"powergossip warm_start=true steps each edge's basis at both ends every round; "
                             f"topology {name!r} changes its links every round (one way): "
                             f"use algorithm_options.warm_start=false (a shared basis per round) or a static graph")


@register
class PowerSGD(Method):
    name, label = "powersgd", "PowerSGD"
    own_compression = True  # low rank, by itself: the --compressor stays `none`
    centralized = True
    Options = PowerSGDOptions
