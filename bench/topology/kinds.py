"""The registry of topology kinds: each builder is filed with what the rest of the suite asks of it — how a
spec spells it and what n it needs (the `bench run --help` line, ``help_text``), whether it is defined on one
node or read from outside, and small examples with their spectral gaps that the generic tests build."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import BenchError
from ..registry import Registry
from ..specs import Spec, number, parse_spec, spell, word

Builder = Callable[[Spec, int, int], object]
"""(parsed spec, n, seed) -> Graph, or PeerSchedule for a time-varying topology."""
Spectrum = Callable[[int, "tuple[int, int] | None"], "list[float]"]
"""(n, grid shape) -> the eigenvalues of the default W in closed form, in any order."""


@dataclass(frozen=True)
class Example:
    """A small topology the generic tests build (tests/test_topology.py): its spec, n and the spectral gap
    its default weights give, within [gap[0], gap[1]] (a closed form where there is one)."""

    spec: str
    n: int
    gap: tuple[float, float]
    # for a kind read from a file: the text the test writes, whose path replaces ``{path}`` in the spec
    file_text: str | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    build: Builder
    usage: str  # how a spec spells it, e.g. ``random-regular:K``
    note: str  # what the help adds (what n it needs, what it is), or ""
    examples: tuple[Example, ...]
    # the only kind defined on a single node (one worker is plain SGD, the n = 1 baseline of a speed-up
    # study); every other needs n >= 2 so that a typo like --nodes 1 on a ring is still caught
    single_node: bool = False
    # read from outside the suite: the spec names a place whose contents may change, so runs and caches
    # name the graph by the digest of its edges (spec and n define every other graph)
    external: bool = False
    time_varying: bool = False  # its builder gives a PeerSchedule: W changes every round
    # the eigenvalues of its default W in closed form, where there is one (the generic tests check W's against it)
    spectrum: Spectrum | None = None
    # (parsed spec, n) -> the revision of the graph it gives, bumped where its matrices changed after runs on it
    # were written (their ids change; base: the authors' idle rounds, 2026-12-07, only where n needs them)
    revision: Callable[[Spec, int], int] | None = None
    # the reader of its numeric argument (erdos-renyi's P, base's K), checked as the builder checks it: how a
    # spec's number is spelt once (canonical); None for a kind without one or whose argument is a path
    arg: Callable[[Spec], float] | None = None
    flags: tuple[tuple[str, bool], ...] = ()  # its boolean options and their defaults (base's inner_edges)


TOPOLOGIES: Registry[Kind] = Registry("topology")


def topology(name: str, *examples: Example, usage: str | None = None, note: str = "", single_node: bool = False,
             external: bool = False, time_varying: bool = False,
             spectrum: Spectrum | None = None,
             revision: Callable[[Spec, int], int] | None = None, arg: Callable[[Spec], float] | None = None,
             flags: tuple[tuple[str, bool], ...] = ()) -> Callable[[Builder], Builder]:
    """Decorator: file the builder under ``name`` with what it declares of itself."""
    if not examples:
        raise RuntimeError(f"topology {name!r} declares no examples for the tests")

    def add(build: Builder) -> Builder:
        TOPOLOGIES.register(name)(Kind(name, build, usage or name, note, examples, single_node, external,
                                                time_varying, spectrum, revision, arg, flags))
        return build

    return add


def canonical(text: str) -> str:
    """The one spelling of the graph ``text`` names: its number as the kind reads it (erdos-renyi:0.30 and
    erdos-renyi:3e-1 are erdos-renyi:0.3), its options in the kind's order and words, less those at their
    default. A path (file:PATH) is kept as written, and a spec that does not parse as it is, for the builder
    to refuse in its own words."""
    try:
        spec = parse_spec(text)
        kind = TOPOLOGIES.get(spec.name)
        defaults = dict(kind.flags)
        spec.check_options(set(defaults))
        flags = {key: spec.option_bool(key, default) for key, default in kind.flags}
        arg = number(kind.arg(spec)) if kind.arg is not None and spec.arg is not None else spec.arg
    except BenchError:
        return text
    if kind.external:
        return text
    return spell(spec.name, arg, {key: word(flag) for key, flag in flags.items() if flag != defaults[key]})


def help_text() -> str:
    """The topologies as `bench run --help` lists them, from what each kind declares (no torch)."""
    kinds = [TOPOLOGIES.get(name) for name in TOPOLOGIES.names()]
    entries = [f"{k.usage} ({k.note})" if k.note else k.usage for k in kinds]
    example = next((e.spec for k in kinds if k.usage != k.name and not k.external for e in k.examples), None)
    listing = ", ".join(entries[:-1]) + f" or {entries[-1]}" if len(entries) > 1 else "".join(entries)
    return f"the communication graph: {listing}" + (f", e.g. {example}" if example else "")
