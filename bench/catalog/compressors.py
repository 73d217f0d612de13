"""The compression operators as a spec names them, before any tensor exists: each operator's knobs, how a
spec such as ``qsgd:4,biased=true`` is read and refused, its canonical spelling and the properties the
algorithms check (unbiased, sparse). bench/compressors/<module>.py adds the encoding to each
(``class QSGD(catalog.QSGD, Compressor)``), so a spec is parsed the same way by `bench run` and by the DAG."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import BenchError
from ..registry import Registry
from ..specs import Spec, parse_fraction, parse_spec
from .algorithms import METHODS

SPECS: Registry[type["OperatorSpec"]] = Registry("compressor")
MAX_BITS = 16  # QSGD's widest level index


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

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "OperatorSpec":
        raise NotImplementedError

    @property
    def spec(self) -> str:
        """Canonical spec, options resolved, so ``make_compressor(c.spec).spec == c.spec``."""
        raise NotImplementedError

    @property
    def form(self) -> str:
        """``exact``, ``contraction`` (E‖Q(x)−x‖² ≤ (1−δ)‖x‖²) or ``unbiased``."""
        return "unbiased" if self.unbiased else "contraction"


def parse_compressor(spec: str, algorithm: str | None = None) -> OperatorSpec:
    """What ``spec`` names, checked as `bench run` checks it (the same lines for a bad spec), without the
    operator's implementation; ``algorithm`` settles QSGD's form as in make_compressor."""
    parsed = parse_spec(spec)
    return SPECS.get(parsed.name).from_spec(parsed, algorithm)


def reject_arg(spec: Spec) -> None:
    """For operators without a main argument (``none``, ``sign``)."""
    if spec.arg is not None:
        raise BenchError(f"{spec.name!r} takes no argument, got {spec.arg!r} in {spec.text!r}; use plain {spec.name!r}")


def needs_contraction(algorithm: str | None) -> bool:
    """Whether ``algorithm``'s analysis needs a δ-contraction (its class says so: Choco); DCD, ECD and
    any other were analysed for unbiased operators and get the unbiased form."""
    return algorithm is not None and algorithm in METHODS and METHODS.get(algorithm).contraction


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


# -- the operators, in the order `known: ...` lists them -------------------------------------------------
@register
@dataclass(frozen=True)
class Identity(OperatorSpec):
    """``none``: exact communication (δ = 1)."""

    name: ClassVar[str] = "none"
    module: ClassVar[str] = "identity"
    unbiased: ClassVar[bool] = True

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "Identity":
        reject_arg(spec)
        spec.check_options(set())
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
    """``qsgd:B``: B bits per level index; ``biased=true`` the rescaled contraction (Choco's default)."""

    bits: int  # B: the level index ξ ∈ {0..2^B − 1} fits B bits
    biased: bool  # True: divide by τ, a δ = 1/τ contraction; False: the unbiased original

    name: ClassVar[str] = "qsgd"
    module: ClassVar[str] = "qsgd"

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "QSGD":
        spec.check_options({"biased"})
        bits = parse_bits(spec)
        return cls(bits=bits, biased=spec.option_bool("biased", needs_contraction(algorithm)))

    @property
    def unbiased(self) -> bool:
        return not self.biased

    @property
    def spec(self) -> str:
        return f"qsgd:{self.bits},biased={'true' if self.biased else 'false'}"


@register
@dataclass(frozen=True)
class Sign(OperatorSpec):
    """``sign``: scaled sign, one bit per entry (biased)."""

    name: ClassVar[str] = "sign"
    module: ClassVar[str] = "sign"
    unbiased: ClassVar[bool] = False

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "Sign":
        reject_arg(spec)
        spec.check_options(set())
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

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "TopK":
        spec.check_options(set())
        return cls(fraction=kept_fraction(spec))

    @property
    def spec(self) -> str:
        return f"top:{self.fraction!r}"


@register
@dataclass(frozen=True)
class RandK(OperatorSpec):
    """``rand:F``: a random fraction F of the coordinates; ``unbiased=true`` scales them by d/k."""

    fraction: float  # kept fraction F in (0, 1]
    unbiased: bool = False  # scale kept entries by d/k; the authors' code never does

    name: ClassVar[str] = "rand"
    module: ClassVar[str] = "sparsify"
    sparse: ClassVar[bool] = True

    @classmethod
    def from_spec(cls, spec: Spec, algorithm: str | None) -> "RandK":
        spec.check_options({"unbiased"})
        return cls(fraction=kept_fraction(spec), unbiased=spec.option_bool("unbiased", False))

    @property
    def spec(self) -> str:
        return f"rand:{self.fraction!r},unbiased={'true' if self.unbiased else 'false'}"
