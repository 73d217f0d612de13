"""Text and YAML into setting values: a value as a field's annotation says (None-able, a number that also
takes some words, a list, a mapping), and ``--set KEY=VALUE`` items and YAML files into plain dicts.
Nothing here knows which settings exist: bench/run/config.py hands each field in."""
from __future__ import annotations

import types
import typing
from dataclasses import Field
from typing import Any

from .. import yamlio
from ..errors import BenchError

NONE_WORDS = ("none", "null", "")  # what a None-able field reads as None (any case)
GROUPS = ("task_options", "algorithm_options", "faults")  # settings that are mappings of named values


def kinds(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """A field's annotation as (origin, accepted types): tuple/dict with their item types, else None
    and the members of the union (``float | None`` -> (None, (float, NoneType)))."""
    origin = typing.get_origin(hint)
    if origin in (tuple, dict):
        return origin, typing.get_args(hint)
    return None, typing.get_args(hint) if origin in (typing.Union, types.UnionType) else (hint,)


def coerce(field: Field, kind: tuple[Any, tuple[Any, ...]], value: Any) -> Any:
    """``value`` from YAML or ``--set`` into the field's type (``kind``, from ``kinds``); one line naming the
    key on failure. A None-able field takes none/null/'' as None; a number field that also takes ``str``
    takes only the words of its metadata; ``int | float`` keeps whole numbers ints (run ids stay)."""
    key, meta = field.name, field.metadata
    origin, accepted = kind
    if origin is tuple:
        return sequence(key, value, accepted[0], meta.get("expects", "a list of numbers"))
    if origin is dict:
        return mapping(key, value, meta.get("expects", "a mapping of names to values"))
    if type(None) in accepted and (value is None or (isinstance(value, str) and value.lower() in NONE_WORDS)):
        return None
    if isinstance(value, str) and value in meta.get("words", ()):
        return value
    try:
        if bool in accepted:
            return boolean(key, value)
        if float in accepted:
            number = _number(key, value, float)
            return int(number) if int in accepted and number.is_integer() else number
        if int in accepted:
            return _number(key, value, int)
    except BenchError:
        if "expects" not in meta:
            raise
        raise BenchError(f"{key}={value!r} must be {meta['expects']}") from None
    return str(value)


def sequence(key: str, value: Any, kind: type, expects: str) -> tuple:
    """A number, a list, or a comma/space separated string as a tuple of ``kind``."""
    if isinstance(value, (int, float)):
        value = [value]
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split()]
    try:
        return tuple(kind(v) for v in value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float's range
        raise BenchError(f"{key}={value!r} must be {expects}") from None


def mapping(key: str, value: Any, expects: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BenchError(f"{key}={value!r} must be {expects}")
    named = [k for k in value if not isinstance(k, str)]
    if named:
        raise BenchError(f"{key} key {named[0]!r} must be an option name (a string)")
    return dict(value)


def boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no"):
        return False
    raise BenchError(f"{key}={value!r} must be true or false")


def _number(key: str, value: Any, kind):
    what = "an integer" if kind is int else "a number"
    if isinstance(value, bool):  # int(True) is 1: `batch_size=true` must not become a batch of one
        raise BenchError(f"{key}={value!r} must be {what}, not true/false")
    try:
        out = kind(value)
        if kind is int and isinstance(value, float) and value != out:
            raise ValueError
        return out
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        raise BenchError(f"{key}={value!r} must be {what}") from None


def load_yaml_text(text: str, where: str) -> Any:
    """YAML ``text`` as plain data (bench/yamlio.py: no aliases, tags or deep nesting); one line naming ``where``."""
    return yamlio.load_yaml(text, where)


def load_yaml(path: str) -> dict[str, Any]:
    """A YAML file of settings as a dict (keys are names); one line naming the file otherwise."""
    where = f"config file {path!r}"
    loaded = yamlio.read_yaml(path, where, "a YAML file of settings")
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise BenchError(f"{where} must hold a mapping of settings")
    named = [k for k in loaded if not isinstance(k, str)]
    if named:
        raise BenchError(f"{where} has the key {named[0]!r}; settings are names, e.g. lr or nodes")
    return loaded


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items (VALUE in YAML) as a dict; ``GROUP.NAME=VALUE`` is one entry of a group's
    mapping (``task_options.hidden=[64]``), later items win."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise BenchError(f"--set {item!r} is not key=value")
        shown = item if len(item) <= 60 else item[:57] + "..."
        value = load_yaml_text(raw, f"--set {shown!r}") if raw else ""
        group, dot, name = key.partition(".")
        if dot and group in GROUPS:
            options = out.setdefault(group, {})
            if not isinstance(options, dict):  # an earlier `--set task_options=0`
                mapping(group, options, _EXPECTS[group])
            options[name] = value
        elif key in GROUPS:
            mapping(key, value, _EXPECTS[key])  # a whole group is a mapping
            merge = key == "algorithm_options" and isinstance(out.get(key), dict)
            out[key] = {**out[key], **value} if merge else value
        else:
            out[key] = value
    return out


_EXPECTS = {"task_options": "a mapping of option names to values, e.g. {hidden: [64, 64]}",
            "algorithm_options": "a mapping of option names to values, e.g. {gamma: 0.3}",
            "faults": "a mapping of fault settings, e.g. {drop: 0.05}"}
