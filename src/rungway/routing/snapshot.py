"""The frozen world a routing decision looks at: connections, quota, health and spend.

The static part (`Roster`: which connection serves which model on which rung) is built
once at start-up. The dynamic part (`ConnectionState`, spend) is copied into a `Snapshot`
for each decision, so a plan never sees state change under it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from rungway.models.capabilities import UNKNOWN, ModelCapabilities
from rungway.pricing import Tier
from rungway.routing.autoid import Category
from rungway.routing.billing import BillingVerdict
from rungway.routing.rungs import Rung
from rungway.routing.terms import UNRESTRICTED, ConnectionTerms


class WindowStatus(StrEnum):
    """What the upstream said of a quota window."""

    ALLOWED = "allowed"
    WARNING = "allowed_warning"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """The last reading of one quota window of one connection.

    `was_exhausted` is the window's exhaustion memory: set when it was last seen at or
    below the exit cut-off (or rejected), cleared once it is back above re-entry. It drives
    hysteresis; nothing else remembers where the ladder stood.
    """

    name: str
    used_percent: float | None
    resets_at: float | None
    checked_at: float
    model: str | None = None
    status: WindowStatus = WindowStatus.ALLOWED
    source: str = "header"
    was_exhausted: bool = False


class BreakerState(StrEnum):
    """A connection's circuit breaker."""

    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """What is known right now about one connection's quota and health."""

    windows: tuple[QuotaWindow, ...] = ()
    cooldown_until: float | None = None
    cooldown_reason: str = ""
    breaker: BreakerState = BreakerState.CLOSED
    overage_permitted: bool | None = None
    """The account's own word on billing past its allowance (Copilot's overage, Claude's
    extra usage, Codex credits), from its usage endpoint or its responses; None when unread."""
    overage_in_use: bool = False
    """The account's last response was served past its quota and billed."""
    disabled: bool = False
    """An operator took the connection out of the ladder; nothing plans it until enabled."""
    breaker_open_until: float | None = None
    """When an open breaker turns half-open and may take a probe; None unless open."""


@dataclass(frozen=True, slots=True)
class RungSpend:
    """Money spent and reserved on one rung in the current budget period."""

    spent_usd: float
    reserved_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One model on one connection: its rung, tier, list price, categories and capabilities."""

    model: str
    rung: Rung
    tier: Tier
    input_per_mtok: float | None
    categories: frozenset[Category]
    capabilities: ModelCapabilities = UNKNOWN


@dataclass(frozen=True, slots=True)
class RosterConnection:
    """A connection's static facts."""

    id: str
    provider: str
    auth: str
    api: str
    billing: BillingVerdict
    models: tuple[ServedModel, ...]
    terms: ConnectionTerms = UNRESTRICTED
    """Which requests its plan's terms and its config let it serve."""
    owner: str | None = None
    """Whose account it is (its config's `owner:`, else its `client_key:`): a pool never
    mixes owners (`routing/pools.py`)."""


@dataclass(frozen=True, slots=True)
class RungShare:
    """The connections of a group that sit on one rung, in config order."""

    rung: Rung
    connection_ids: tuple[str, ...]
    input_per_mtok: float | None


class GroupMember(NamedTuple):
    """One connection of a group, and the model as that connection serves it."""

    connection: RosterConnection
    served: ServedModel


@dataclass(frozen=True, slots=True)
class ModelGroup:
    """A (provider, model), the connections serving it, and their split by rung."""

    provider: str
    model: str
    categories: frozenset[Category]
    members: tuple[GroupMember, ...]
    shares: tuple[RungShare, ...]
    capabilities: ModelCapabilities = UNKNOWN


class Roster:
    """Every connection and (provider, model) group, indexed once."""

    def __init__(self, connections: Iterable[RosterConnection]) -> None:
        self.connections: Mapping[str, RosterConnection] = MappingProxyType(
            {connection.id: connection for connection in connections}
        )
        grouped: dict[tuple[str, str], list[GroupMember]] = {}
        for connection in self.connections.values():
            for served in connection.models:
                grouped.setdefault((connection.provider, served.model), []).append(
                    GroupMember(connection, served)
                )
        # Equal id tuples are shared between groups (a provider's models usually have the
        # same connections), so a plan can judge each distinct tuple once per request.
        interned: dict[tuple[str, ...], tuple[str, ...]] = {}
        groups = []
        for (provider, model), members in grouped.items():
            by_rung: dict[Rung, list[GroupMember]] = {}
            for member in members:
                by_rung.setdefault(member.served.rung, []).append(member)
            shares = []
            for rung in sorted(by_rung):
                ids = tuple(connection.id for connection, _ in by_rung[rung])
                ids = interned.setdefault(ids, ids)
                shares.append(RungShare(rung, ids, by_rung[rung][0].served.input_per_mtok))
            first = members[0].served
            groups.append(
                ModelGroup(
                    provider,
                    model,
                    first.categories,
                    tuple(members),
                    tuple(shares),
                    first.capabilities,
                )
            )
        self.groups: tuple[ModelGroup, ...] = tuple(groups)
        self.derived: dict[object, object] = {}
        """Facts a consumer derives from the roster once and keeps (the ladder's indexes)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The roster and the dynamic state at one instant."""

    roster: Roster
    states: Mapping[str, ConnectionState] = field(default_factory=dict)
    spend: Mapping[Rung, RungSpend] = field(default_factory=dict)
