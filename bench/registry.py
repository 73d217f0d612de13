"""A tiny name -> factory registry shared by topologies, compressors, algorithms and tasks, and the one way their
plugins are found: every module of the plugin's package is imported, and a module that defines one registers it."""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, Iterable, TypeVar

from .errors import BenchError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._retired: dict[str, str] = {}  # name -> where it went (one clear line instead of 'unknown')
        self.changes = 0  # registrations so far: what is derived from the entries is stale once this moves

    def register(self, name: str) -> Callable[[T], T]:
        def add(obj: T) -> T:
            if name in self._entries:
                raise RuntimeError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = obj
            self.changes += 1
            return obj

        return add

    def retire(self, name: str, where: str) -> None:
        """A name that once was registered: asking for it says ``where`` it went."""
        self._retired[name] = where

    def retired(self) -> dict[str, str]:
        """The retired names and where each went (for a registry that answers for the same names)."""
        return dict(self._retired)

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            if name in self._retired:
                raise BenchError(f"{self.kind} {name!r} {self._retired[name]}") from None
            raise BenchError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries


def import_modules(package: str, path: Iterable[str]) -> None:
    """Import every module of ``package`` (its ``__path__``), in name order: a plugin registers itself on import
    (``@register``), a shared module of the package registers nothing, and no list of names is kept anywhere."""
    for name in sorted(m.name for m in pkgutil.iter_modules(path)):
        importlib.import_module(f"{package}.{name}")
