"""The one YAML reader of the suite: plain data only, with the same refusals for every file and value.

Settings, studies, recipes, the pipeline's schema and `--set` values all go through ``load_yaml``. It refuses
what plain settings never need and a hostile file uses: anchors and aliases (ten nested aliases, the
"billion laughs", expand to billions of values once printed, hashed or validated), tags other than the plain
types, nesting deeper than ``MAX_DEPTH``, texts over ``MAX_CHARS``, and a key given twice (the second would
silently win). Every refusal is one BenchError line naming the source. ``check_plain`` does the same for data
that something else loaded (Snakemake reads ``--configfile`` itself). Imports only PyYAML.
"""
from __future__ import annotations

import datetime
from typing import Any

import yaml

from .errors import BenchError
from .files import read_regular_text

MAX_DEPTH = 64  # nested mappings and lists; a study is about five deep
MAX_CHARS = 1 << 20  # 1 MiB; the largest file of the suite is a few kB
_CORE = "tag:yaml.org,2002:"
# the types plain settings are made of; `!` (a plain string) too. Not binary, set, omap, pairs, timestamp
TAGS = frozenset({"!", *(_CORE + t for t in ("str", "int", "float", "bool", "null", "seq", "map"))})
ALIASES = "anchors and aliases are not read: write the value out"
SHOWN_TAGS = ", ".join(sorted(t.replace(_CORE, "!!") for t in TAGS if t != "!"))
DEPTH = f"at most {MAX_DEPTH} levels are read"


class _Refused(yaml.YAMLError):
    """A refusal of the loader: what was found, what is allowed, and the line it is on."""

    def __init__(self, problem: str, allowed: str, mark=None):
        super().__init__(problem)
        self.problem, self.allowed = problem, allowed
        self.line = mark.line + 1 if mark is not None else None


class _PlainLoader(yaml.SafeLoader):
    """PyYAML's safe loader that also refuses anchors, aliases, unknown tags, deep nesting and repeated keys."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(f"uses the YAML alias *{event.anchor}", ALIASES, event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"uses the YAML anchor &{event.anchor}", ALIASES, event.start_mark)
        tag = getattr(event, "tag", None)
        if tag is not None and tag not in TAGS:
            raise _Refused(f"uses the YAML tag {tag.replace(_CORE, '!!')}", f"allowed tags: {SHOWN_TAGS}",
                          event.start_mark)
        if not isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"is nested more than {MAX_DEPTH} levels deep", DEPTH, event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen: set = set()
        for key_node, _ in node.value:
            if key_node.tag == _CORE + "merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the constructor below says so
                continue
            if repeated:
                raise _Refused(f"gives the key {key!r} twice", "give each key once", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, source: str) -> Any:
    """The plain data of YAML ``text``; one BenchError line naming ``source`` when it is not valid YAML or
    uses what settings never need (above)."""
    if len(text) > MAX_CHARS:
        raise BenchError(f"{source} is {len(text):,} characters long; YAML read here is at most {MAX_CHARS:,}")
    try:
        return yaml.load(text, Loader=_PlainLoader)
    except _Refused as err:
        at = f" (line {err.line})" if err.line else ""
        raise BenchError(f"{source} {err.problem}{at}; {err.allowed}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or (str(err).splitlines() or [type(err).__name__])[0]
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise BenchError(f"{source} is not valid YAML: {problem}{at}") from None
    except RecursionError:
        raise BenchError(f"{source} is not valid YAML here: nested too deeply") from None
    except Exception as err:  # PyYAML's constructors raise plain errors on bad tagged values: !!float ;, !!int x
        detail = (str(err).splitlines() or [type(err).__name__])[0]
        raise BenchError(f"{source} is not valid YAML: a tagged value cannot be read ({detail})") from None


def read_yaml(path, source: str, what: str = "a YAML file") -> Any:
    """load_yaml of the file at ``path``; a file that is missing, a folder, not UTF-8 text or unreadable is one
    BenchError line naming ``source`` and what to give (``what``)."""
    try:
        text = read_regular_text(path)
    except FileNotFoundError:
        raise BenchError(f"{source} does not exist") from None
    except IsADirectoryError:
        raise BenchError(f"{source} is a directory; give {what}") from None
    except UnicodeDecodeError:
        raise BenchError(f"{source} is not text (not UTF-8); give {what}") from None
    except OSError as err:
        raise BenchError(f"{source} cannot be read: {err.strerror or err}") from None
    return load_yaml(text, source)


_PLAIN = (str, int, float, bool, type(None), datetime.date)  # what the safe loader gives (dates unquoted)


def check_plain(value: Any, source: str) -> None:
    """Refuse data loaded elsewhere that ``load_yaml`` would not give: one object reached twice (an alias),
    nesting deeper than MAX_DEPTH, a value of another type (a tag). Visits each object once, so an alias
    bomb is refused at its first repeat instead of being expanded."""
    seen: set[int] = set()
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        item, depth, where = stack.pop()
        at = f" at {where}" if where else ""
        if isinstance(item, _PLAIN):
            continue
        if not isinstance(item, (dict, list)):
            raise BenchError(f"{source} holds a {type(item).__name__}{at} (a YAML tag); plain values, lists and "
                             f"mappings only, tags {SHOWN_TAGS}")
        if depth > MAX_DEPTH:
            raise BenchError(f"{source} is nested more than {MAX_DEPTH} levels deep{at}; {DEPTH}")
        if id(item) in seen:
            raise BenchError(f"{source} repeats a value{at} (a YAML alias); {ALIASES}")
        seen.add(id(item))
        pairs = list(item.items() if isinstance(item, dict) else enumerate(item))
        for key, child in reversed(pairs):  # reversed onto the stack: visited in order, the first repeat named
            if isinstance(item, dict) and not isinstance(key, _PLAIN):
                raise BenchError(f"{source} has a key of type {type(key).__name__}{at}; keys are plain values")
            stack.append((child, depth + 1, f"{where}.{key}".lstrip(".") if isinstance(item, dict)
                          else f"{where}[{key}]"))
