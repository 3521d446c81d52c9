"""Model routing without the ladder: which connections may serve a requested model name.

Resolution order for a requested name:
1. an alias (exact name, then glob pattern) replaces the name once;
2. a name some connection serves as written ("bare") goes to every such connection,
   in config order; this comes first because model names may contain `/`;
3. `connection-id/model` goes to that connection only;
4. `provider/model` goes to that provider's connections that serve the model.
An `auto` id (after aliasing) goes to the ladder; a malformed one raises `BadAutoId`.
Anything else is unknown, and the error says what is available.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from rungway.routing.autoid import AutoSpec, advertised_auto_ids, is_auto_id, parse_auto_id


@dataclass(frozen=True, slots=True)
class ConnectionFacts:
    """What resolution needs to know of a connection."""

    id: str
    provider: str
    models: frozenset[str]


@dataclass(frozen=True, slots=True)
class Target:
    """One connection that may serve the request, and the model name it knows."""

    connection_id: str
    model: str


@dataclass(frozen=True, slots=True)
class Resolution:
    """Where a requested model name may go: named targets in order, or the ladder."""

    requested: str
    resolved: str
    targets: tuple[Target, ...]
    auto: AutoSpec | None = None
    exact: bool = True
    """False when a glob alias matched: the name is one of endlessly many, not worth keeping."""


class UnknownModel(Exception):
    """No connection serves the requested model; the message says what does exist."""


class ModelTable:
    """An index of connections and aliases, built once from the settings."""

    def __init__(self, connections: Iterable[ConnectionFacts], aliases: Mapping[str, str]) -> None:
        self._connections = {facts.id: facts for facts in connections}
        self._exact_aliases = {name: to for name, to in aliases.items() if not _is_glob(name)}
        self._glob_aliases = [(name, to) for name, to in aliases.items() if _is_glob(name)]
        self._by_model: dict[str, list[str]] = {}
        for facts in self._connections.values():
            for model in sorted(facts.models):
                self._by_model.setdefault(model, []).append(facts.id)
        self._providers = {facts.provider for facts in self._connections.values()}

    def models(self) -> list[tuple[str, str]]:
        """Every servable name as (model, provider of its first connection), aliases too."""
        listed = [
            (model, self._connections[ids[0]].provider)
            for model, ids in sorted(self._by_model.items())
        ]
        listed += [(alias, "rungway") for alias in sorted(self._exact_aliases)]
        listed += [(auto, "rungway") for auto in advertised_auto_ids()]
        return listed

    def resolve(self, requested: str) -> Resolution:
        """Resolve `requested` to its targets or raise `UnknownModel`."""
        name, exact = self._alias(requested)
        if is_auto_id(name):
            return Resolution(requested, name, (), parse_auto_id(name), exact)
        ids = self._by_model.get(name)
        if ids:
            return Resolution(requested, name, tuple(Target(cid, name) for cid in ids), None, exact)
        prefix, _, model = name.partition("/")
        if model:
            connection = self._connections.get(prefix)
            if connection is not None:
                if model not in connection.models:
                    raise UnknownModel(
                        f"connection {prefix!r} does not serve {model!r}; "
                        f"it serves: {', '.join(sorted(connection.models))}"
                    )
                return Resolution(requested, name, (Target(prefix, model),), None, exact)
            if prefix in self._providers:
                targets = tuple(
                    Target(facts.id, model)
                    for facts in self._connections.values()
                    if facts.provider == prefix and model in facts.models
                )
                if targets:
                    return Resolution(requested, name, targets, None, exact)
                raise UnknownModel(f"no {prefix!r} connection serves {model!r}")
        raise UnknownModel(self._unknown_message(requested, name))

    def _alias(self, requested: str) -> tuple[str, bool]:
        """The name after aliasing, and whether it came without a glob pattern."""
        target = self._exact_aliases.get(requested)
        if target is not None:
            return target, True
        for pattern, to in self._glob_aliases:
            if fnmatchcase(requested, pattern):
                return to, False
        return requested, True

    def _unknown_message(self, requested: str, name: str) -> str:
        known = [model for model, _ in self.models()]
        shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
        via = f" (alias of {requested!r})" if name != requested else ""
        return f"model {name!r}{via} is not served by any connection; available: {shown}"


def _is_glob(name: str) -> bool:
    return any(char in name for char in "*?[")
