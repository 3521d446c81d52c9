"""The dynamic state a ladder decision reads, and the port it comes through.

Quota readings, cooldowns and breakers (`ConnectionState`) and spend per rung come from
stores that the engine does not own; it asks a `StateSource` for a copy at each decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from rungway.routing.rungs import Rung
from rungway.routing.snapshot import ConnectionState, RungSpend


class StateSource(Protocol):
    """Where the engine reads quota, health and spend from."""

    def connection_states(self) -> Mapping[str, ConnectionState]:
        """The current state of every connection that has any."""
        ...

    def rung_spend(self) -> Mapping[Rung, RungSpend]:
        """Spend and reservations per rung in the current budget period."""
        ...


class NoTelemetry:
    """A source that knows nothing: every reading is missing and no spend is known.

    `auto/thrifty` then drops nothing (missing telemetry admits), and `auto/subscription`
    admits nothing (an unverified plan is never used).
    """

    def connection_states(self) -> Mapping[str, ConnectionState]:
        """No states."""
        return {}

    def rung_spend(self) -> Mapping[Rung, RungSpend]:
        """No spend."""
        return {}
