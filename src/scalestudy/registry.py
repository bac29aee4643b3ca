"""The one shape of every list of things a study can name.

Each kind (architectures, priors, pretraining stages, tasks, figures, claims)
has one `Registry`: its entries in order, keyed by name. Everything else that
needs the list (the config schema's accepted values, wildcard constraints,
plot styles and orders, the figures a grid feeds) is derived from it, so that
adding a thing is its own module plus one entry here-shaped, never a second list.
Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(ValueError, KeyError):
    """A name a registry does not have; says which kind and what it accepts."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Registry(Mapping, Generic[T]):
    """Entries (each with a `name`) in the order given; `registry[name]` raises
    UnknownName naming the kind (e.g. "arch") and the accepted names."""

    def __init__(self, kind: str, entries: Iterable[T]):
        self.kind = kind
        self._entries: dict[str, T] = {}
        for entry in entries:
            if entry.name in self._entries:
                raise ValueError(f"{kind}: {entry.name!r} registered twice")
            self._entries[entry.name] = entry

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(f"{self.kind}: unknown {name!r}, accepted values: "
                              f"{', '.join(self._entries)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def rank(self, name: str) -> tuple[int, str]:
        """A sort key: registry order, unknown names last (alphabetically)."""
        names = self.names
        return (names.index(name) if name in self._entries else len(names), name)
