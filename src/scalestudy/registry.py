"""The one shape of every list of things a study can name.

Each kind (architectures, priors, pretraining stages, tasks, figures, claims)
has one `Registry`: its entries in order, keyed by name. Everything else that
needs the list (the config schema's accepted values, wildcard constraints,
plot styles and orders, the figures a grid feeds) is derived from it, so that
adding a thing is its own module plus one entry here-shaped, never a second list.

A kind a user may extend (architectures, tasks, priors: scalestudy.extend)
names an entry-point `group`: the entries that installed distributions
declare there (`[project.entry-points."scalestudy.architectures"]`) join the
registry the first time it is read, and a plugin module a study names
(`plugins:`, scalestudy.plugins) joins it by `register` when imported. Either
way the registry stays the one list, and a name two sources claim is refused
naming both. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")
BUILT_IN = "scalestudy"


class UnknownName(ValueError, KeyError):
    """A name a registry does not have; says which kind and what it accepts."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PluginError(ValueError):
    """A plugin that cannot join a registry (it does not import, or it names
    something another source has): one line naming the plugin and why."""


class Registry(Mapping, Generic[T]):
    """Entries (each with a `name`) in the order given; `registry[name]` raises
    UnknownName naming the kind (e.g. "arch") and the accepted names.
    `source(name)` says where an entry comes from: "scalestudy" for a built-in,
    else the plugin that registered it."""

    def __init__(self, kind: str, entries: Iterable[T], group: str | None = None):
        self.kind = kind
        self.group = group
        self._installed = group is None  # the group's entry points not loaded yet
        self._entries: dict[str, T] = {}
        self._sources: dict[str, str] = {}
        for entry in entries:
            if entry.name in self._entries:
                raise ValueError(f"{kind}: {entry.name!r} registered twice")
            self._entries[entry.name] = entry
            self._sources[entry.name] = BUILT_IN

    def register(self, entry: T, source: str) -> T:
        """Add a plugin's entry (`source`: the plugin, for messages); a name
        the registry already has is refused, naming who has it."""
        self._load_installed()
        if entry.name in self._entries:
            raise PluginError(f"{source}: {self.kind} {entry.name!r} is already "
                              f"{self._sources[entry.name]}'s; give it another name")
        self._entries[entry.name] = entry
        self._sources[entry.name] = source
        return entry

    def source(self, name: str) -> str:
        self[name]  # noqa: B018 (an entry of the registry, or UnknownName)
        return self._sources[name]

    def plugins(self) -> dict[str, str]:
        """The entries that plugins added: name -> source."""
        self._load_installed()
        return {name: src for name, src in self._sources.items() if src != BUILT_IN}

    def _load_installed(self) -> None:
        """The entries the group's entry points declare, once per process: each
        entry point is an entry, or a list of entries."""
        if self._installed:
            return
        self._installed = True
        from importlib.metadata import entry_points

        for point in entry_points(group=self.group):
            where = f"{point.dist.name if point.dist else '?'} (entry point {point.name} in " \
                    f"{self.group})"
            try:
                loaded = point.load()
            except Exception as err:
                raise PluginError(f"{where}: cannot be imported: {type(err).__name__}: "
                                  f"{err}") from None
            for entry in loaded if isinstance(loaded, list | tuple) else [loaded]:
                if not hasattr(entry, "name"):
                    raise PluginError(f"{where}: {entry!r} is not a {self.kind} entry "
                                      f"(scalestudy.extend says what one is)")
                if self._entries.get(entry.name) is not entry:
                    self.register(entry, where)

    def __getitem__(self, name: str) -> T:
        self._load_installed()
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(f"{self.kind}: unknown {name!r}, accepted values: "
                              f"{', '.join(self._entries)}") from None

    def __contains__(self, name: object) -> bool:
        self._load_installed()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._load_installed()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._load_installed()
        return len(self._entries)

    @property
    def names(self) -> tuple[str, ...]:
        self._load_installed()
        return tuple(self._entries)

    def rank(self, name: str) -> tuple[int, str]:
        """A sort key: registry order, unknown names last (alphabetically)."""
        names = self.names
        return (names.index(name) if name in self._entries else len(names), name)
