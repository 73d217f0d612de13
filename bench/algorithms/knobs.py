"""How a method's option (a knob) is declared, read and range-checked: ``knob`` for an Options field, and the
readers every method shares (a step in (0, 1], a count of rounds, a flag, ...), so no method borrows another's."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import BenchError

# A knob's metadata says how a value from YAML or --set is read and checked (``read``: one function, the knob's
# only range check), whether a run-level word names it (``shortcut``: `--set gamma=0.3` is
# ``algorithm_options.gamma``), whether a tuning grid may search it (``tune``: such a knob always has its run-level
# word, by which the grid names it), its bounds for the analysis
# (``low``/``high``), and the value a plan times it at when it is left to tuning (``planned``).
AUTO = "auto"


def knob(default: Any, read, **meta) -> Any:
    return field(default=default, metadata={"read": read, **meta})


@dataclass(frozen=True)
class NoOptions:
    pass


class KnobOptions:
    """Base of options classes whose fields are knobs: each given value is read (coerced and checked) by its
    field's ``read`` on construction, so a knob is checked in one place; ``parse_options`` names the method in
    what it refuses (one class may serve several methods)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            read = f.metadata.get("read")
            if read is not None:
                value = read(f.name, getattr(self, f.name))
                high = f.metadata.get("high")  # a count's bound (a fraction's reader checks its own)
                if high is not None and isinstance(value, (int, float)) and value > high:
                    raise BenchError(f"{f.name}={value!r} must be at most {high:g}"
                                     + (f" ({f.metadata['why_high']})" if "why_high" in f.metadata else ""))
                object.__setattr__(self, f.name, value)


# -- the readers: (the knob's name, the value given) -> the value, or one line -----------------------------
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


def fraction(where: str, value: Any) -> float:
    """A step or a weight in (0, 1], a number (no ``auto``)."""
    number = _number(value)
    if number is None or not 0.0 < number <= 1.0:  # NaN fails too
        raise BenchError(f"{where}={value!r} must be a number in (0, 1]")
    return number


def decay(where: str, value: Any) -> float:
    """A moving average's weight of the past, in [0, 1)."""
    number = _number(value)
    if number is None or not 0.0 <= number < 1.0:  # NaN fails too
        raise BenchError(f"{where}={value!r} must be a number in [0, 1)")
    return number


def positive(where: str, value: Any) -> float:
    number = _number(value)
    if number is None or not 0.0 < number < float("inf"):
        raise BenchError(f"{where}={value!r} must be a positive number")
    return number


def above_one(where: str, value: Any) -> float:
    """A divisor that shrinks what it divides: a finite number > 1."""
    number = _number(value)
    if number is None or not 1.0 < number < float("inf"):
        raise BenchError(f"{where}={value!r} must be a number > 1")
    return number


def epochs_list(where: str, value: Any) -> tuple[float, ...]:
    """Epochs at which something changes: finite numbers >= 0 in increasing order (a list; a tuple once read)."""
    if not isinstance(value, (list, tuple)):
        raise BenchError(f"{where}={value!r} must be a list of epochs")
    numbers = [_number(v) for v in value]
    if any(n is None or not 0.0 <= n < float("inf") for n in numbers) or numbers != sorted(set(numbers)):
        raise BenchError(f"{where}={list(value)!r} must be epochs >= 0 in increasing order")
    return tuple(numbers)


def flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BenchError(f"{where}={value!r} must be true or false")
    return value


def read_rank(where: str, value: Any) -> int:
    """A low-rank approximation's rank, an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BenchError(f"{where}={value!r} must be a positive integer")
    return value


def order_knob() -> Any:
    """Gossip-then-step (``paper``) or step-then-gossip (the authors' ``code``): one field per class, the same
    reader and default everywhere (the run-level word ``order`` names it)."""
    return knob("paper", read_order, shortcut=True)


def _number(value) -> float | None:
    """A knob's value as a float (a number, or text that reads as one); None for anything else (a bool too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None
