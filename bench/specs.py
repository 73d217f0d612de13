"""Parsing of the suite's spec strings, e.g. ``rand:0.01,unbiased=true`` or ``erdos-renyi:0.3``.

A spec is ``name[:arg][,key=value ...]``. The name picks a registry entry, the optional
argument is its main knob, the options are extra knobs with typed values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import BenchError


@dataclass(frozen=True)
class Spec:
    name: str
    arg: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    def option_bool(self, key: str, default: bool) -> bool:
        raw = self.options.get(key)
        if raw is None:
            return default
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise BenchError(f"option {key}={raw!r} in {self.text!r} is not a boolean (use true or false)")

    def check_options(self, allowed: set[str]) -> None:
        unknown = sorted(set(self.options) - allowed)
        if unknown:
            allowed_txt = ", ".join(sorted(allowed)) or "none"
            raise BenchError(f"unknown option {unknown[0]!r} in {self.text!r}; allowed options: {allowed_txt}")


def parse_spec(text: str) -> Spec:
    """Split ``name:arg,k=v,...`` into its parts; ``file:`` keeps everything after the colon as arg."""
    if not isinstance(text, str) or not text.strip():
        raise BenchError(f"empty spec {text!r}")
    text = text.strip()
    head, *rest = text.split(",")
    name, _, arg = head.partition(":")
    options: dict[str, str] = {}
    for item in rest:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise BenchError(f"malformed option {item!r} in {text!r}; expected key=value")
        options[key.strip()] = value.strip()
    return Spec(name=name.strip(), arg=(arg.strip() or None) if _ else None, options=options, text=text)


# -- one spelling per spec: a run's identity and a cell's name are taken from it (bench/run/identity.py) ------------
def spell(name: str, arg: str | None = None, options: dict[str, str] | None = None) -> str:
    """``name[:arg][,key=value ...]``, the options in the order given."""
    head = name if arg is None else f"{name}:{arg}"
    return ",".join([head, *(f"{key}={value}" for key, value in (options or {}).items())])


def number(value: float) -> str:
    """A spec's number in one spelling: a whole number as an integer (dirichlet:10, base:2), any other as Python's
    shortest form that reads back (0.10 and 1e-1 are 0.1)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return str(int(value))
    return repr(value)


def word(flag: bool) -> str:
    """A boolean option's spelling (``option_bool`` reads true/True/1/yes/on as True)."""
    return "true" if flag else "false"


def parse_fraction(spec: Spec, what: str = "kept fraction") -> float:
    """The main argument as a number in (0, 1]: the kept fraction F of ``top:F`` / ``rand:F``,
    the edge probability of ``erdos-renyi:P``."""
    if spec.arg is None:
        raise BenchError(f"{spec.text!r} needs its {what} as argument, e.g. {spec.name}:0.1 (a number in (0, 1])")
    try:
        value = float(spec.arg)
    except ValueError:
        raise BenchError(f"{what} {spec.arg!r} in {spec.text!r} is not a number in (0, 1]") from None
    if not 0.0 < value <= 1.0:
        raise BenchError(f"{what} {spec.arg} in {spec.text!r} is outside (0, 1]")
    return value
