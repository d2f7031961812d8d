"""Name -> object registries: one per kind of choice (backbones, schedulers, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from orthotune.core._errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """A case-insensitive mapping from names to entries of one kind.

    An unknown name fails listing the valid ones, as PyG's resolver does.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(entry: T) -> T:
            self.add(name, entry)
            return entry

        return add

    def add(self, name: str, entry: T) -> None:
        key = name.lower()
        if key in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[key] = entry

    def get(self, name: str) -> T:
        key = str(name).lower()
        if key not in self._entries:
            raise ConfigError(
                f"unknown {self.kind} {name!r}; valid: {', '.join(self.names())}"
            )
        return self._entries[key]

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)
