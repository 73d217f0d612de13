"""What the rest of the suite asks of a method, declared by its class (``Method``, the base of every Algorithm):
its flags, the checks of a compressor, graph, network, faults and backend they imply, and what run.json and a
run's id say of it; the one registry of methods, and ``parse_options`` that builds a method's options."""
from __future__ import annotations

from dataclasses import asdict, fields
from typing import ClassVar

from ..errors import BenchError
from ..registry import Registry
from .knobs import AUTO, NoOptions

ALGORITHMS: Registry[type["Method"]] = Registry("algorithm")


def register(cls: type["Method"]) -> type["Method"]:
    """Class decorator: file a method under its ``name`` (importing bench.algorithms imports every module)."""
    ALGORITHMS.register(cls.name)(cls)
    return cls


def reference_method() -> str:
    """The name of the method every other is measured against (the one that declares ``reference``)."""
    found = [n for n in ALGORITHMS.names() if ALGORITHMS.get(n).reference]
    if len(found) != 1:
        raise RuntimeError(f"exactly one method declares reference = True, not {found}")
    return found[0]


def _those(test) -> str:
    """The registered methods ``test`` holds for, for a line that says what to use instead."""
    return ", ".join(n for n in ALGORITHMS.names() if test(ALGORITHMS.get(n)))


class Method:
    """A method's facts, said once by its class and written into run.json (``describe``): nothing else branches
    on an algorithm's name."""

    name: ClassVar[str]
    label: ClassVar[str]  # its name in tables and figures
    Options: ClassVar[type] = NoOptions
    compresses: ClassVar[bool] = True  # False: sends exact models, only the `none` compressor makes sense
    contraction: ClassVar[bool] = False  # its analysis needs a δ-contraction (QSGD then takes its rescaled form)
    consensus_step: ClassVar[bool] = False  # has Choco's consensus step γ (tuned on the consensus problem when auto)
    centralized: ClassVar[bool] = False  # every worker applies the same update (all models equal; no graph used)
    reference: ClassVar[bool] = False  # the method every gap is measured against (one: reference_method())
    # compresses by its own scheme (e.g. PowerSGD's low rank): --compressor stays `none`
    own_compression: ClassVar[bool] = False
    # its update takes the same W every round (it keeps W times its public copies up to date round by round, or
    # draws neighbours from one graph): refused on a time-varying graph (one-peer-exp)
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
    # bumped when its update changes after runs of it were written: its runs get new ids, so a finished
    # directory of the old maths is not taken for the new one
    revision: ClassVar[int] = 0
    # bumped when how it finds an `auto` knob changes (BEER and DeepSqueeze: γ tuned on their own gossip, no
    # longer on Choco-Gossip's): such runs get new ids, the others keep theirs
    auto_revision: ClassVar[int] = 0

    @classmethod
    def keeps_average_with(cls, options) -> bool:
        """Whether it keeps the average with these (parsed) options; an option may give the promise up."""
        return True

    # -- what it cannot run: one line each -----------------------------------------------------------------
    @classmethod
    def check_backend(cls, backend: str) -> None:
        """One line when this method cannot run under ``backend`` (sim or dist); every method runs in both."""

    @classmethod
    def check_faults(cls, spec) -> None:
        """One line when this method has no rule for lost messages and ``spec`` (a FaultSpec) loses some."""
        if spec.delays and cls.late_rule is None:
            raise BenchError(f"faults.late: algorithm {cls.name!r} has no rule for a late message yet; methods "
                             "that take late messages: " + _those(lambda m: m.late_rule is not None))
        if spec.away and spec.pairwise and cls.fault_rule != "reweight":
            raise BenchError(f"faults.pairwise: algorithm {cls.name!r} cannot gossip one edge a round (it "
                             "cannot sit the other workers out); methods that can: "
                             + _those(lambda m: m.fault_rule == "reweight"))
        if spec.away and cls.fault_rule is not None and cls.fault_rule != "reweight":
            raise BenchError(f"faults.active/absent: algorithm {cls.name!r} cannot sit a worker out yet (its "
                             "rule keeps copies per link, which a frozen worker would leave behind); methods "
                             "that take workers away: " + _those(lambda m: m.fault_rule == "reweight"))
        if not spec.loses or cls.fault_rule is not None:
            return
        why = ("a collective has no partial form" if cls.centralized else
               "its public copies or per-link state would split between sender and receiver")
        raise BenchError(f"faults: algorithm {cls.name!r} has no rule for a lost message yet ({why}); "
                         f"methods that take faults: {_those(lambda m: m.fault_rule is not None)}")

    @classmethod
    def check_compressor(cls, compressor) -> None:
        """One line when this algorithm cannot use ``compressor`` (an operator or its parsed spec); the pipeline
        asks before it submits a run."""
        if cls.own_compression and compressor.name != "none":
            raise BenchError(f"algorithm {cls.name!r} compresses by its own scheme (see its options); "
                             f"use --compressor none (got {compressor.spec!r})")
        if not cls.compresses and compressor.name != "none":
            compressing = _those(lambda m: m.compresses and not m.own_compression)
            raise BenchError(f"algorithm {cls.name!r} sends exact models; use --compressor none "
                             f"(got {compressor.spec!r}) or one of {compressing}")

    @classmethod
    def check_topology(cls, name: str, time_varying: bool, options=None) -> None:
        """One line when this algorithm (with its parsed ``options``, when known) cannot run on the graph ``name``:
        a method declared ``fixed_graph`` on a time-varying one."""
        if cls.fixed_graph and time_varying:
            raise BenchError(f"algorithm {cls.name!r} needs a fixed graph (its update takes the same W every "
                             f"round); topology {name!r} changes W every round: use a static graph, or one of "
                             f"{_those(lambda m: not m.fixed_graph)}")

    @classmethod
    def check_network(cls, network) -> None:
        """One line when this algorithm cannot run on ``network``: a collective on a broadcast medium (a ring
        all-reduce forwards a different chunk on each hop, which one shared transmission cannot carry)."""
        if cls.centralized and network.broadcast:
            raise BenchError(f"network medium=broadcast (in {network.name!r}) carries gossip, not the collectives "
                             f"algorithm {cls.name!r} uses; use medium=links or one of "
                             f"{_those(lambda m: not m.centralized)}")

    # -- its knobs, as tuning, planning and run ids see them ---------------------------------------------
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

    @classmethod
    def identity(cls, raw: dict, compressor: str) -> dict:
        """What, beyond its settings, tells this method's runs apart (added to the run's fingerprint): the
        revision of its update, and that of how a knob left to ``auto`` is found, when one is and tuning happens
        (compressed messages)."""
        out = {"algorithm_revision": cls.revision} if cls.revision else {}
        if cls.auto_revision and compressor != "none" and any(
                raw.get(f.name, f.default) == AUTO for f in fields(cls.Options) if f.metadata.get("tune")):
            out["auto_revision"] = cls.auto_revision
        return out

    @classmethod
    def knobs(cls) -> dict:
        """Each option's default and, for a number, its bounds: written into run.json, so that the analysis
        learns a knob's range (a tuning grid is never extended past it) from the runs."""
        return {f.name: {"default": f.default, **{k: f.metadata[k] for k in ("low", "high", "tune") if k in f.metadata}}
                for f in fields(cls.Options)}

    # -- what run.json says of it ------------------------------------------------------------------------
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


_SHORTCUTS: list = [None, {}]  # ((the registry, its changes) when read, the words the methods gave)


def shortcuts() -> dict:
    """The run-level words that name a knob (``gamma``, ``order``, and every knob a tuning grid may search, such as
    ``copy_step``) -> the option field; one field per word, which every method that has the knob shares
    (tests/test_knobs.py). Read again only when the registered methods change: every setting a study resolves
    asks (a DAG of thousands of jobs, each checked)."""
    key = (id(ALGORITHMS), ALGORITHMS.changes)
    if _SHORTCUTS[0] != key:
        out = {}
        for name in ALGORITHMS.names():
            for f in fields(ALGORITHMS.get(name).Options):
                if f.metadata.get("shortcut") or f.metadata.get("tune"):  # a grid names a tunable knob by its word
                    out.setdefault(f.name, f)
        _SHORTCUTS[:] = [key, out]
    return dict(_SHORTCUTS[1])
