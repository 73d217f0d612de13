"""The algorithms as the rest of the suite sees them before any tensor exists: name, label, what they do with
a compressor, a graph and a network, and their own options. bench/algorithms/<name>.py adds the maths to each
(``class Choco(catalog.Choco, Algorithm)``); the run, the pipeline's checks and the analysis read these."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Literal

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
    # run settings that are not knobs but that the method reads (handed to Options by the same name)
    settings: ClassVar[tuple[str, ...]] = ()
    # what it does with a message lost on a link (the run's faults): "reweight" (the receiver keeps the weight
    # of what did not arrive on its own model); None: no rule yet, so runs with faults are refused
    fault_rule: ClassVar[str | None] = None
    # what it does with a message that arrives rounds late (faults.late): "stale" (the receiver mixes with the
    # newest copy it has heard), "ack" (a per-link copy takes the message at both ends when it arrives)
    late_rule: ClassVar[str | None] = None
    # the slope in ρ (log-log) of its paper's bound on the consensus distance, which the report fits against
    # (Choco: 1/(ρ⁴δ²), Koloskova et al. 2020); None: no such bound
    consensus_slope: ClassVar[float | None] = None
    # drawn beside the exact references when a figure has room for only a few methods (Choco, the paper's)
    headline: ClassVar[bool] = False
    # its round adds nothing to the sum of the models but −η Σ_i d_i, whatever is sent: it sends exact models or
    # mixes public copies by a consensus step (tests/test_keeping_the_average.py holds every such method to it)
    keeps_average: ClassVar[bool] = False

    @classmethod
    def keeps_average_with(cls, options) -> bool:
        """Whether it keeps the average with these (parsed) options; an option may give the promise up."""
        return True

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
    def tunable(cls, compressor: str, options: dict | None = None) -> tuple[str, ...]:
        """The method's knobs a tuning grid may search with ``compressor`` (a spec) and the cell's raw
        ``options``: those its Options mark ``tune`` (γ), and none with the `none` compressor (γ = 1 is exact
        gossip; PowerGossip, which compresses by itself, keeps γ as given there too, as studies always did)."""
        if compressor == "none":
            return ()
        return tuple(f.name for f in fields(cls.Options) if f.metadata.get("tune"))

    @classmethod
    def planning_options(cls, raw: dict) -> dict:
        """``raw`` options with every knob left to tuning fixed at a value that costs a step the same (a plan
        times steps; it tunes nothing)."""
        out = dict(raw)
        for f in fields(cls.Options):
            if "planned" in f.metadata and out.get(f.name, f.default) == AUTO:
                out[f.name] = f.metadata["planned"]
        return out

    # bumped when how the method finds an `auto` knob changes (BEER and DeepSqueeze: γ tuned on their own
    # gossip, no longer on Choco-Gossip's): such runs get new ids, the others keep theirs
    auto_revision: ClassVar[int] = 0

    @classmethod
    def identity(cls, raw: dict, compressor: str) -> dict:
        """What, beyond its settings, tells this method's runs apart (added to the run's fingerprint): the
        revision of how a knob left to ``auto`` is found, when one is and tuning happens (compressed messages)."""
        if not cls.auto_revision or compressor == "none":
            return {}
        auto = any(raw.get(f.name, f.default) == AUTO for f in fields(cls.Options) if f.metadata.get("tune"))
        return {"auto_revision": cls.auto_revision} if auto else {}

    @classmethod
    def knobs(cls) -> dict:
        """Each option's default and, for a number, its bounds: written into run.json, so that the analysis
        learns a knob's range (a tuning grid is never extended past it) from the runs."""
        out = {}
        for f in fields(cls.Options):
            info = {"default": f.default, **{k: f.metadata[k] for k in ("low", "high", "tune") if k in f.metadata}}
            out[f.name] = info
        return out

    @classmethod
    def describe(cls) -> dict:
        return {"name": cls.name, "label": cls.label, "compresses": cls.compresses, "contraction": cls.contraction,
                "consensus_step": cls.consensus_step, "centralized": cls.centralized,
                "own_compression": cls.own_compression, "consensus_slope": cls.consensus_slope,
                "headline": cls.headline, "knobs": cls.knobs()}

    @classmethod
    def variant(cls, options) -> tuple[str, str] | None:
        """(name, label) under which the analysis shows the method with these (parsed) options when an option
        makes it a method of its own (Choco with AdaGossip), or None."""
        return None

    @classmethod
    def describe_with(cls, options) -> dict:
        """run.json's "algorithm": what the class says of itself, its options, and, under a variant's options,
        the variant's name and label (``variant_of``: the registered name), which the analysis shows apart."""
        out = {**cls.describe(), "options": asdict(options)}
        named = cls.variant(options)
        if named is not None:
            out.update(name=named[0], label=named[1], variant_of=cls.name, headline=False)
        return out


def parse_options(cls: type[Method], raw: dict | None):
    """Build an algorithm's frozen options from a dict, rejecting unknown keys with one line. A shortcut knob
    the method does not have (a study's ``gamma`` default reaching D-PSGD's cells) is not its option: left out."""
    raw = dict(raw or {})
    known = {f.name: f for f in fields(cls.Options)}
    for name in set(raw) - set(known):
        if name in shortcuts():
            del raw[name]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise BenchError(f"unknown option {unknown[0]!r} for algorithm {cls.name!r}; allowed: {allowed}")
    try:
        return cls.Options(**raw)
    except BenchError as err:
        text = str(err)
        raise BenchError(text if text.startswith(f"{cls.name} ") else f"{cls.name} {text}") from None


# -- knobs ------------------------------------------------------------------------------------------------
# An option field's metadata says how a value from YAML or --set is read and checked (``read``: one function,
# the knob's only range check), whether a run-level word names it (``shortcut``: `--set gamma=0.3` is
# ``algorithm_options.gamma``), whether a tuning grid may search it (``tune``), its bounds for the analysis
# (``low``/``high``), and the value a plan times it at when it is left to tuning (``planned``).
AUTO = "auto"


def knob(default: Any, read, **meta) -> Any:
    return field(default=default, metadata={"read": read, **meta})


class KnobOptions:
    """Base of options classes whose fields are knobs: each given value is read (coerced and checked) by its
    field's ``read`` on construction, so a knob is checked in one place; ``parse_options`` names the method in
    what it refuses (one class may serve several methods)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            read = f.metadata.get("read")
            if read is not None:
                object.__setattr__(self, f.name, read(f.name, getattr(self, f.name)))


def read_step(where: str, value: Any) -> float | str:
    """A consensus step: ``auto`` or a number in (0, 1] (a whole number as a float, as run ids were taken)."""
    if isinstance(value, str) and value == AUTO:
        return value
    if isinstance(value, bool):
        raise BenchError(f"{where}={value!r} must be 'auto' or in (0, 1]")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise BenchError(f"{where}={value!r} must be 'auto' or in (0, 1]") from None
    if not 0.0 < number <= 1.0:  # NaN fails too
        raise BenchError(f"{where}={number!r} must be 'auto' or in (0, 1]")
    return number


def read_rounds(where: str, value: Any) -> int:
    """A count of rounds >= 1 (a whole float as an int)."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float, str))
    try:
        number = float(value) if ok else None
    except ValueError:
        number = None
    if number is None or not number.is_integer():
        raise BenchError(f"{where}={value!r} must be an integer")
    if number < 1:
        raise BenchError(f"{where}={int(number)} must be >= 1")
    return int(number)


def read_order(where: str, value: Any) -> str:
    if value not in ("paper", "code"):
        raise BenchError(f"{where}={value!r}; allowed: paper, code")
    return value


@dataclass(frozen=True)
class ConsensusStepOptions(KnobOptions):
    """The knobs of a method with a consensus step γ."""

    # γ in (0, 1], or auto: tuned by the method on its own gossip (grad = 0) over logspace(-3, 0, 20), as the
    # paper's authors tuned Choco's, once per (graph, n, compressor), cached; 1 under exact messages
    gamma: float | str = knob(AUTO, read_step, shortcut=True, tune=True, low=0.0, high=1.0, planned=0.5)
    gamma_tune_steps: int = knob(1000, read_rounds, shortcut=True)  # gossip rounds per γ of the grid under auto


_SHORTCUTS: list = [None, {}]  # ((the registry, its changes) when read, the words the methods gave)


def shortcuts() -> dict:
    """The run-level words that name a knob (``gamma``, ``gamma_tune_steps``, ``order``) -> the option field;
    one field per word, which every method that has the knob shares (tests/test_knobs.py). Read again only when
    the registered methods change: every setting a study resolves asks (a DAG of thousands of jobs, each checked)."""
    key = (id(METHODS), METHODS.changes)
    if _SHORTCUTS[0] != key:
        out = {}
        for name in METHODS.names():
            for f in fields(METHODS.get(name).Options):
                if f.metadata.get("shortcut"):
                    out.setdefault(f.name, f)
        _SHORTCUTS[:] = [key, out]
    return dict(_SHORTCUTS[1])


def _rank(method: str, rank) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise BenchError(f"{method} rank={rank!r} must be a positive integer")


def _number(value) -> float | None:
    """A knob's value as a float (a number, or text that reads as one); None for anything else (a bool too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _flag(where: str, value) -> None:
    if not isinstance(value, bool):
        raise BenchError(f"{where}={value!r} must be true or false")


# -- the options of each method ---------------------------------------------------------------------
@dataclass(frozen=True)
class ADPSGDOptions:
    # the run's `faults` and `seed` settings, handed over by name (Method.settings): the stragglers pace its
    # workers and the seed draws their neighbours (bench/faults/events.py); nothing else of faults is read
    faults: dict | None = None
    seed: int = 0

    def __post_init__(self) -> None:  # the faults are read (and refused) with the run's settings, in validate
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise BenchError(f"adpsgd seed={self.seed!r} must be an integer >= 0")


def order_knob() -> Any:  # gossip-then-step (paper) or step-then-gossip (the authors' code); a field per class
    return knob("paper", read_order, shortcut=True)


@dataclass(frozen=True)
class BEEROptions(ConsensusStepOptions):
    """γ: the mixing step of both gossips (the paper's γ)."""


def _static_graph_only(method: str, mix: str, topology: str, time_varying: bool) -> None:
    """One line for a method that keeps ``mix`` (W times its public copies) up to date round by round."""
    if time_varying:
        raise BenchError(f"algorithm {method!r} keeps {mix} (the mix of its public copies) up to date round by "
                         f"round, which holds only for a fixed graph; topology {topology!r} changes W every round: "
                         "use a static graph")


@dataclass(frozen=True)
class CEDASOptions(KnobOptions):
    """The steps of CEDAS's compressed exchange and its step-size rule (bench/algorithms/cedas.py). No ``auto``:
    its gossip alone is exact diffusion's, not a consensus problem a γ is tuned on."""

    @staticmethod
    def fraction(where: str, value: Any) -> float:
        """A step in (0, 1], a number (LEAD's steps are read by it too)."""
        number = _number(value)
        if number is None or not 0.0 < number <= 1.0:  # NaN fails too
            raise BenchError(f"{where}={value!r} must be a number in (0, 1]")
        return number

    @staticmethod
    def schedule(where: str, value: Any) -> str:
        if value not in ("constant", "decaying"):
            raise BenchError(f"{where}={value!r}; allowed: constant, decaying")
        return value

    # γ: x = φ − (γ/2)(φ̂ − φ̂_w); 1 is exact diffusion's W̄ = (I + W)/2 (γ ≤ 1 keeps I − γ(I − W)/2 ⪰ 0)
    mix_step: float = knob(1.0, fraction, tune=True, low=0.0, high=1.0)
    # α: the copies' step, h += α q; it shrinks as Q's variance C grows (about 1/(1 + C)): 0.1 suits 10× compression
    copy_step: float = knob(0.1, fraction, tune=True, low=0.0, high=1.0)
    # α_k: the run's lr (constant) or the paper's decaying rule lr·m/(k + m) (decaying, m = decay_shift)
    stepsize: str = knob("constant", schedule)
    decay_shift: int = knob(100, read_rounds)


@dataclass(frozen=True)
class ChocoOptions(ConsensusStepOptions):
    """γ, the order of step and gossip, and AdaGossip (Aketi et al. 2024), which turns γ into the base of a
    step per coordinate, γ/(√v + ε), v the running mean of the squared consensus direction
    (bench/algorithms/choco.py); under it γ = auto is AdaGossip's base step, not tuned."""

    @staticmethod
    def flag(where: str, value: Any) -> bool:
        _flag(where, value)
        return value

    @staticmethod
    def decay(where: str, value: Any) -> float:
        """A moving average's weight of the past, in [0, 1)."""
        number = _number(value)
        if number is None or not 0.0 <= number < 1.0:  # NaN fails too
            raise BenchError(f"{where}={value!r} must be a number in [0, 1)")
        return number

    @staticmethod
    def positive(where: str, value: Any) -> float:
        number = _number(value)
        if number is None or not 0.0 < number < float("inf"):
            raise BenchError(f"{where}={value!r} must be a positive number")
        return number

    order: Literal["paper", "code"] = order_knob()  # see bench/algorithms/choco.py
    adagossip: bool = knob(False, flag)  # AdaGossip's adaptive consensus step (AdaG-SGD)
    ada_beta: float = knob(0.999, decay)  # β of v ← βv + (1 − β) u², bias-corrected as in Adam
    ada_eps: float = knob(1e-8, positive)  # ε of γ/(√v + ε)


@dataclass(frozen=True)
class DeepSqueezeOptions(ConsensusStepOptions):
    """γ: the authors' consensus_stepsize."""


@dataclass(frozen=True)
class DGCOptions:
    factor_masking: bool = True  # zero the momentum u where v was sent (the paper's momentum factor masking)

    def __post_init__(self) -> None:
        _flag("dgc factor_masking", self.factor_masking)


@dataclass(frozen=True)
class DoCoMOptions(ConsensusStepOptions):
    """γ: the consensus step of both gossips; β: the momentum weight (bench/algorithms/docom.py)."""

    # v ← (1 − β) v + β g: the weight of a new gradient (1: the plain gradient); 0.3 as in the authors' scripts
    beta: float = knob(0.3, CEDASOptions.fraction, low=0.0, high=1.0)


@dataclass(frozen=True)
class DPSGDOptions(KnobOptions):
    order: Literal["paper", "code"] = order_knob()  # gossip-then-step (paper) or step-then-gossip (code)


@dataclass(frozen=True)
class LEADOptions(KnobOptions):
    """γ and α of LEAD's Algorithm 1 (bench/algorithms/lead.py; η is the run's lr). No ``auto``: its consensus is
    driven by the dual step, so there is no gossip alone to tune γ on."""

    # γ: D += γ/(2η)(Ŷ − Ŷ_w); 1 with the identity is NIDS (γ ≤ 1 keeps I − γ(I − W)/2 ⪰ 0)
    dual_step: float = knob(1.0, CEDASOptions.fraction, tune=True, low=0.0, high=1.0)
    # α: the copies' step, H += α Q; it shrinks as Q's variance C grows (about 1/(1 + C)): 0.1 suits 10× compression
    copy_step: float = knob(0.1, CEDASOptions.fraction, tune=True, low=0.0, high=1.0)


@dataclass(frozen=True)
class MoTEFOptions(ConsensusStepOptions):
    """γ: the consensus step of both gossips; λ (``lam``): the momentum weight (bench/algorithms/motef.py)."""

    # m ← (1 − λ) m + λ g: the weight of a new gradient (1: the plain gradient, BEER); 0.1 the suite's choice
    lam: float = knob(0.1, CEDASOptions.fraction, low=0.0, high=1.0)


@dataclass(frozen=True)
class PowerGossipOptions(ConsensusStepOptions):  # γ: the authors' diffusion_rate
    rank: int = 1  # r, the rank of each layer's approximation of the model differences (the authors' default 1)
    # True: a basis per edge, warm-started from its last difference (published); False: one shared random basis
    warm_start: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        _rank("powergossip", self.rank)
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
    keeps_average = True
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
    keeps_average = True
    compresses = False
    centralized = True


@register
class BEER(Method):
    name, label = "beer", "BEER"
    keeps_average = True
    # the paper's compression operators are contractions (biased, E‖Q(x) − x‖² ≤ (1 − α)‖x‖²)
    contraction = True
    consensus_step = True
    auto_revision = 1
    Options = BEEROptions
    fault_rule = "ack"  # h and g per link, a lost message added at neither end: mean(v) tracks mean(d)
    late_rule = "ack"  # a late q of h or g added at both ends when it lands


@register
class CEDAS(Method):
    name, label = "cedas", "CEDAS"
    # mean(x) moves by −α_k mean(d) whatever is sent (α_k = lr unless stepsize=decaying): (W − I)·copies sums to 0
    keeps_average = True
    # contraction stays False: the paper's analysis takes unbiased operators (QSGD then takes its unbiased form)
    Options = CEDASOptions

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        super().check_topology(name, time_varying, options)
        _static_graph_only(cls.name, "W·h", name, time_varying)


@register
class Choco(Method):
    name, label = "choco", "Choco-SGD"
    keeps_average = True
    consensus_slope, headline = -4.0, True
    contraction = True
    consensus_step = True
    Options = ChocoOptions
    fault_rule = "ack"  # copies per link, a lost message added at neither end: the average is kept
    late_rule = "ack"  # a late message added at both ends when it arrives

    @classmethod
    def tunable(cls, compressor: str, options: dict | None = None) -> tuple[str, ...]:
        # AdaGossip adapts the consensus step per coordinate: γ is its base, not a knob a grid searches
        knobs = super().tunable(compressor, options)
        return tuple(k for k in knobs if k != "gamma") if (options or {}).get("adagossip") is True else knobs

    @classmethod
    def keeps_average_with(cls, options) -> bool:
        # a step per worker and coordinate, γ_i ⊙ u_i, no longer sums to zero over the workers
        return not options.adagossip

    @classmethod
    def variant(cls, options) -> tuple[str, str] | None:
        return ("choco+adagossip", "Choco-SGD + AdaGossip") if options.adagossip else None


@register
class DCD(Method):
    name, label = "dcd", "DCD-PSGD"


@register
class DeepSqueeze(Method):
    name, label = "deepsqueeze", "DeepSqueeze"
    keeps_average = True
    contraction = True  # the analysis bounds the compression error relative to its input
    consensus_step = True
    auto_revision = 1
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
class DoCoM(BEER):
    """BEER's flags (contraction compressors, γ, copies per link, the "ack" rules, the average): its module is
    BEER tracking a momentum estimate (bench/algorithms/docom.py)."""

    name, label = "docom", "DoCoM"
    auto_revision = 0  # a new method: no runs found γ otherwise
    Options = DoCoMOptions


@register
class DPSGD(Method):
    name, label = "dpsgd", "D-PSGD"
    keeps_average = True
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
class LEAD(Method):
    name, label = "lead", "LEAD"
    # mean(D) stays 0 (its increments are (I − W)·copies), so mean(x) moves by −η mean(d) whatever is sent
    keeps_average = True
    # contraction stays False: the paper's compressors are unbiased, E‖Q(x) − x‖² ≤ C‖x‖² (QSGD's unbiased form)
    Options = LEADOptions

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        super().check_topology(name, time_varying, options)
        _static_graph_only(cls.name, "W·H", name, time_varying)


@register
class MoTEF(BEER):
    """BEER's flags (contraction compressors, γ, copies per link, the "ack" rules, the average): its module is
    BEER tracking a momentum estimate (bench/algorithms/motef.py)."""

    name, label = "motef", "MoTEF"
    auto_revision = 0  # a new method: no runs found γ otherwise
    Options = MoTEFOptions


@register
class PowerGossip(Method):
    name, label = "powergossip", "PowerGossip"
    keeps_average = True
    own_compression = True  # low rank, by itself: the --compressor stays `none`
    consensus_step = True
    Options = PowerGossipOptions

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        super().check_topology(name, time_varying, options)
        if time_varying and (options is None or options.warm_start):
            raise BenchError(f"powergossip warm_start=true steps each edge's basis at both ends every round; "
                             f"topology {name!r} changes its links from round to round, so an edge's basis has "
                             f"no next round at both its ends: "
                             f"use algorithm_options.warm_start=false (a shared basis per round) or a static graph")


@register
class PowerSGD(Method):
    name, label = "powersgd", "PowerSGD"
    own_compression = True  # low rank, by itself: the --compressor stays `none`
    centralized = True
    Options = PowerSGDOptions
