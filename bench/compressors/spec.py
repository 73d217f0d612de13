"""How a spec such as ``qsgd:4,biased=true`` names an operator: the registry of operators, the part of an
operator that a spec fixes (its knobs, canonical spelling, the properties the algorithms check, how figures
show it), the parse with its one-line refusals, and the operators' line of `bench run --help`. Each operator
declares its own part in its module, beside its encoding (``@register`` on a ``Compressor`` subclass). Nothing
here knows the algorithms: a caller says whether it needs a contraction (``contraction=``, from its class)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import BenchError
from ..registry import Registry
from ..specs import Spec, parse_fraction, parse_spec, spell

if TYPE_CHECKING:
    from .base import Compressor

MAX_BITS = 16  # QSGD's widest level index
LAST = 5  # the legend place of an operator that declares none: after the paper's five

# Filled by importing every module of bench/compressors (its __init__): a module that defines an operator
# files it with ``register``; the helper modules file nothing.
COMPRESSORS: Registry[type["Compressor"]] = Registry("compressor")


def register(cls: type["Compressor"]) -> type["Compressor"]:
    """Class decorator: file the operator under its ``name``, the part of a spec before ':'."""
    COMPRESSORS.register(cls.name)(cls)
    return cls


class OperatorSpec:
    """What every operator is before it compresses anything; an operator is a frozen dataclass of its knobs
    with ``from_spec`` and ``spec`` (bench/compressors/base.py's ``Compressor`` adds the encoding)."""

    name: ClassVar[str]  # registry name: the part of a spec before ':'
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


def make_compressor(spec: str, *, contraction: bool = False) -> "Compressor":
    """The operator a spec such as ``qsgd:4`` names, or one line saying what is wrong with the spec;
    ``contraction`` (the algorithm class's ``contraction``: its analysis needs a δ-contraction) settles QSGD's
    form when the spec leaves it open. Building one allocates nothing: the DAG checks a cell's spec with it."""
    parsed = parse_spec(spec)
    return COMPRESSORS.get(parsed.name).from_spec(parsed, check_contraction(contraction))


parse_compressor = make_compressor  # the pipeline's name for it: a spec parsed is the operator it names


def canonical(text: str, *, contraction: bool = False) -> str:
    """The one spelling of the operator ``text`` names for an algorithm of ``contraction``: its argument as the
    operator spells it (top:0.10 and top:1e-1 are top:0.1), the options it gives in the operator's order and
    words, less those that change nothing (rand:0.1,unbiased=false is rand:0.1; qsgd:4,biased=true under Choco
    is qsgd:4). A spec that does not parse is returned as it is, for its parse to refuse in its own words."""
    try:
        given = parse_spec(text)
        operator = make_compressor(text, contraction=contraction)
    except BenchError:
        return text
    own = parse_spec(operator.spec)
    cls = COMPRESSORS.get(given.name)

    def changes(key: str) -> bool:
        rest = {k: v for k, v in given.options.items() if k != key}
        return cls.from_spec(Spec(given.name, given.arg, rest, given.text), contraction) != operator

    options = {key: value for key, value in own.options.items() if key in given.options and changes(key)}
    return spell(own.name, own.arg if given.arg is not None else None, options)


def check_contraction(contraction: object) -> bool:
    """``contraction`` is a flag (an algorithm's name here would read as true and pick a form silently)."""
    if not isinstance(contraction, bool):
        raise TypeError(f"contraction must be True or False (the algorithm class's `contraction`), got {contraction!r}")
    return contraction


def help_text() -> str:
    """The operators as `bench run --help` lists them, from what each declares."""
    entries = []
    for name in COMPRESSORS.names():
        cls = COMPRESSORS.get(name)
        options = f"; option {', '.join(cls.options)}" if cls.options else ""
        entries.append(f"{cls.usage} ({cls.summary}{options})")
    examples = [cls.examples[0] for cls in map(COMPRESSORS.get, COMPRESSORS.names())
                if cls.examples and cls.usage != cls.name]
    return (f"the compression operator Q: {', '.join(entries)}; options after commas"
            + (f", e.g. {', '.join(examples[:-1])} or {examples[-1]}" if len(examples) > 1 else ""))


# -- what the operators' ``from_spec`` share ------------------------------------------------------------
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
