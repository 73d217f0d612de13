"""The compression operators as a spec names them, before any tensor exists: each operator's knobs, how a
spec such as ``qsgd:4,biased=true`` is read and refused, its canonical spelling, the properties the algorithms
check (unbiased, sparse), how figures show it (label, family, legend order, marker: run.json carries them, so
analysis learns them from the runs) and its line of `bench run --help` (``help_text``).
bench/compressors/<module>.py adds the encoding to each (``class QSGD(catalog.QSGD, Compressor)``), so a spec
is parsed the same way by `bench run` and by the DAG. Nothing here knows the algorithms: a caller says whether
it needs a contraction (``contraction=``, from its algorithm's class)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..errors import BenchError
from ..registry import Registry
from ..specs import Spec, parse_fraction, parse_spec

SPECS: Registry[type["OperatorSpec"]] = Registry("compressor")
MAX_BITS = 16  # QSGD's widest level index
LAST = 5  # the legend place of an operator that declares none: after the paper's five


def register(cls: type["OperatorSpec"]) -> type["OperatorSpec"]:
    SPECS.register(cls.name)(cls)
    return cls


class OperatorSpec:
    """What every operator is before it compresses anything; subclasses are frozen dataclasses of their
    knobs with ``from_spec`` and ``spec``."""

    name: ClassVar[str]  # registry name: the part of a spec before ':'
    module: ClassVar[str]  # the module of bench/compressors that implements it
    unbiased: bool  # E[Q(x)] = x; a class constant, a field or a property in subclasses
    sparse: ClassVar[bool] = False  # sends some coordinates and their positions; the rest are not sent
    options: ClassVar[tuple[str, ...]] = ()  # the options a spec may give after commas
    usage: ClassVar[str]  # how a spec spells it, e.g. ``top:F`` (for `bench run --help`)
    summary: ClassVar[str]  # what it does, in a few words (for `bench run --help`)
    examples: ClassVar[tuple[str, ...]] = ()  # small specs the generic tests run on every operator
    # how figures show it: its family shares one marker (None: its own name), ``order`` its place among
    # compressors in legends (the paper's: none, QSGD, random, top, sign), ``marker`` a fixed matplotlib
    # marker (None: the next free one)
    family: ClassVar[str | None] = None
    order: ClassVar[int] = LAST
    marker: ClassVar[str | None] = None

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "OperatorSpec":
        """The operator ``spec`` names; ``contraction``: the caller's algorithm needs a δ-contraction, which
        settles the form of an operator that has both (QSGD) when the spec leaves it open."""
        raise NotImplementedError

    @property
    def spec(self) -> str:
        """Canonical spec, options resolved, so ``make_compressor(c.spec).spec == c.spec``."""
        raise NotImplementedError

    @property
    def form(self) -> str:
        """``exact``, ``contraction`` (E‖Q(x)−x‖² ≤ (1−δ)‖x‖²) or ``unbiased``."""
        return "unbiased" if self.unbiased else "contraction"

    @property
    def label(self) -> str:
        """Its name in tables and figures, main argument included (``top 1%``); a figure adds the options
        the run's spec spells out."""
        return self.name

    @property
    def size(self) -> float:
        """Its main argument as a number (bits, kept fraction): larger ones come first in a legend."""
        return 0.0

    def looks(self) -> dict[str, Any]:
        """How analysis shows it (run.json's ``compressor`` entry carries these; analysis/labels.py learns them)."""
        return {"label": self.label, "family": self.family or self.name, "order": [self.order, -self.size],
                **({"marker": self.marker} if self.marker else {})}


def parse_compressor(spec: str, *, contraction: bool = False) -> OperatorSpec:
    """What ``spec`` names, checked as `bench run` checks it (the same lines for a bad spec), without the
    operator's implementation; ``contraction`` settles QSGD's form as in make_compressor."""
    parsed = parse_spec(spec)
    return SPECS.get(parsed.name).from_spec(parsed, check_contraction(contraction))


def check_contraction(contraction: object) -> bool:
    """``contraction`` is a flag (an algorithm's name here would read as true and pick a form silently)."""
    if not isinstance(contraction, bool):
        raise TypeError(f"contraction must be True or False (the algorithm class's `contraction`), got {contraction!r}")
    return contraction


def help_text() -> str:
    """The operators as `bench run --help` lists them, from what each declares (no torch)."""
    entries = []
    for name in SPECS.names():
        cls = SPECS.get(name)
        options = f"; option {', '.join(cls.options)}" if cls.options else ""
        entries.append(f"{cls.usage} ({cls.summary}{options})")
    examples = [cls.examples[0] for cls in map(SPECS.get, SPECS.names()) if cls.examples and cls.usage != cls.name]
    return (f"the compression operator Q: {', '.join(entries)}; options after commas"
            + (f", e.g. {', '.join(examples[:-1])} or {examples[-1]}" if len(examples) > 1 else ""))


def reject_arg(spec: Spec) -> None:
    """For operators without a main argument (``none``, ``sign``)."""
    if spec.arg is not None:
        raise BenchError(f"{spec.name!r} takes no argument, got {spec.arg!r} in {spec.text!r}; use plain {spec.name!r}")


def kept_fraction(spec: Spec) -> float:
    """F of ``top:F`` / ``rand:F``, in (0, 1]. A bare ``1`` is refused: it keeps every coordinate (no
    compression), and is nearly always meant as 1 %; keeping everything is written ``1.0``."""
    if spec.arg is not None and spec.arg.strip() == "1":
        raise BenchError(f"{spec.text!r} keeps every coordinate (no compression); for 1 % write "
                         f"{spec.name}:0.01, and to keep everything on purpose {spec.name}:1.0")
    return parse_fraction(spec)


def parse_bits(spec: Spec) -> int:
    allowed = f"an integer number of bits in 1..{MAX_BITS}"
    if spec.arg is None:
        raise BenchError(f"{spec.text!r} needs a number of bits, e.g. qsgd:4 ({allowed})")
    try:
        bits = int(spec.arg)
    except ValueError:
        raise BenchError(f"bits {spec.arg!r} in {spec.text!r} is not {allowed}") from None
    if not 1 <= bits <= MAX_BITS:
        raise BenchError(f"bits {bits} in {spec.text!r} is outside 1..{MAX_BITS}; use {allowed}")
    return bits


def percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


# -- the operators, in the order `known: ...` lists them -------------------------------------------------
@register
@dataclass(frozen=True)
class Identity(OperatorSpec):
    """``none``: exact communication (δ = 1)."""

    name: ClassVar[str] = "none"
    module: ClassVar[str] = "identity"
    unbiased: ClassVar[bool] = True
    usage: ClassVar[str] = "none"
    summary: ClassVar[str] = "exact communication"
    examples: ClassVar[tuple[str, ...]] = ("none",)
    order: ClassVar[int] = 0
    marker: ClassVar[str] = "o"

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "Identity":
        reject_arg(spec)
        spec.check_options(set(cls.options))
        return cls()

    @property
    def spec(self) -> str:
        return "none"

    @property
    def form(self) -> str:
        return "exact"


@register
@dataclass(frozen=True)
class QSGD(OperatorSpec):
    """``qsgd:B``: B bits per level index; ``biased=true`` the rescaled contraction (the default of an
    algorithm that needs a contraction, as Choco does)."""

    bits: int  # B: the level index ξ ∈ {0..2^B − 1} fits B bits
    biased: bool  # True: divide by τ, a δ = 1/τ contraction; False: the unbiased original

    name: ClassVar[str] = "qsgd"
    module: ClassVar[str] = "qsgd"
    options: ClassVar[tuple[str, ...]] = ("biased",)
    usage: ClassVar[str] = "qsgd:B"
    summary: ClassVar[str] = "B bits, s = 2^B − 1 levels; a contraction where the algorithm needs one"
    examples: ClassVar[tuple[str, ...]] = ("qsgd:2,biased=true", "qsgd:2,biased=false", "qsgd:8,biased=true")
    order: ClassVar[int] = 1
    marker: ClassVar[str] = "v"

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "QSGD":
        spec.check_options(set(cls.options))
        bits = parse_bits(spec)
        return cls(bits=bits, biased=spec.option_bool("biased", contraction))

    @property
    def unbiased(self) -> bool:
        return not self.biased

    @property
    def spec(self) -> str:
        return f"qsgd:{self.bits},biased={'true' if self.biased else 'false'}"

    @property
    def label(self) -> str:
        return f"QSGD {self.bits}-bit"

    @property
    def size(self) -> float:
        return float(self.bits)


@register
@dataclass(frozen=True)
class Sign(OperatorSpec):
    """``sign``: scaled sign, one bit per entry (biased)."""

    name: ClassVar[str] = "sign"
    module: ClassVar[str] = "sign"
    unbiased: ClassVar[bool] = False
    usage: ClassVar[str] = "sign"
    summary: ClassVar[str] = "scaled sign, one bit an entry"
    examples: ClassVar[tuple[str, ...]] = ("sign",)
    order: ClassVar[int] = 4
    marker: ClassVar[str] = "D"

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "Sign":
        reject_arg(spec)
        spec.check_options(set(cls.options))
        return cls()

    @property
    def spec(self) -> str:
        return "sign"


@register
@dataclass(frozen=True)
class TopK(OperatorSpec):
    """``top:F``: the largest fraction F of the coordinates (biased)."""

    fraction: float  # kept fraction F in (0, 1]

    name: ClassVar[str] = "top"
    module: ClassVar[str] = "sparsify"
    unbiased: ClassVar[bool] = False
    sparse: ClassVar[bool] = True
    usage: ClassVar[str] = "top:F"
    summary: ClassVar[str] = "the largest fraction F of the coordinates"
    examples: ClassVar[tuple[str, ...]] = ("top:0.1", "top:0.5", "top:1.0")
    order: ClassVar[int] = 3
    marker: ClassVar[str] = "s"

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "TopK":
        spec.check_options(set(cls.options))
        return cls(fraction=kept_fraction(spec))

    @property
    def spec(self) -> str:
        return f"top:{self.fraction!r}"

    @property
    def label(self) -> str:
        return f"top {percent(self.fraction)}"

    @property
    def size(self) -> float:
        return self.fraction


@register
@dataclass(frozen=True)
class RandK(OperatorSpec):
    """``rand:F``: a random fraction F of the coordinates; ``unbiased=true`` scales them by d/k."""

    fraction: float  # kept fraction F in (0, 1]
    unbiased: bool = False  # scale kept entries by d/k; the authors' code never does

    name: ClassVar[str] = "rand"
    module: ClassVar[str] = "sparsify"
    sparse: ClassVar[bool] = True
    options: ClassVar[tuple[str, ...]] = ("unbiased",)
    usage: ClassVar[str] = "rand:F"
    summary: ClassVar[str] = "a random fraction F of the coordinates"
    examples: ClassVar[tuple[str, ...]] = ("rand:0.1", "rand:0.3,unbiased=true")
    order: ClassVar[int] = 2
    marker: ClassVar[str] = "^"

    @classmethod
    def from_spec(cls, spec: Spec, contraction: bool) -> "RandK":
        spec.check_options(set(cls.options))
        return cls(fraction=kept_fraction(spec), unbiased=spec.option_bool("unbiased", False))

    @property
    def spec(self) -> str:
        return f"rand:{self.fraction!r},unbiased={'true' if self.unbiased else 'false'}"

    @property
    def label(self) -> str:
        return f"random {percent(self.fraction)}"

    @property
    def size(self) -> float:
        return self.fraction
