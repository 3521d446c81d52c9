"""The dynamic state a ladder decision reads, and the ports it comes and goes through.

Quota readings, cooldowns and breakers (`ConnectionState`) and spend per rung come from
stores the engine does not own: it asks a `StateSource` for them at each decision, and
tells a `QuotaObserver` what every upstream answer said.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from rungway.budget.local import HeldFor, Reservation, Shortfall
from rungway.budget.unavailable import BudgetUnavailable
from rungway.protocol.failures import Failure
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import ConnectionState, QuotaWindow, RungSpend


class StateSource(Protocol):
    """Where the engine reads quota and health from."""

    def connection_states(self, now: float) -> Mapping[str, ConnectionState]:
        """The state at `now` of every connection that has any."""
        ...


class Budget(Protocol):
    """Where paid attempts' money is held: reserved before an attempt, settled after it."""

    async def reserve(
        self,
        rung: Rung,
        client_key: str | None,
        amount: float,
        now: float,
        *,
        held_for: HeldFor | None = None,
    ) -> Reservation | Shortfall | BudgetUnavailable | None:
        """Hold `amount` against the rung's and the key's budgets for the request
        `held_for` names, or say which cannot (over budget, or the budget's store does not
        answer); None when neither has a budget."""
        ...

    def settle(self, reservation: Reservation, cost: float, now: float) -> None:
        """Replace a reservation with the real cost."""
        ...

    def spend(
        self,
        rung: Rung,
        client_key: str | None,
        cost: float,
        now: float,
        *,
        request_id: str | None = None,
    ) -> None:
        """Count a cost that had no reservation; `request_id` lets a shared store count it
        once however often it is sent."""
        ...

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back."""
        ...

    def rung_spend(self, now: float) -> Mapping[Rung, RungSpend]:
        """Spent and reserved per rung in the current period."""
        ...


class QuotaObserver(Protocol):
    """Where the engine reports what each upstream answer said."""

    def observe(self, connection_id: str, windows: Iterable[QuotaWindow], now: float) -> None:
        """The quota windows one response reported."""
        ...

    def observe_overage(
        self, connection_id: str, permitted: bool, in_use: bool | None = None
    ) -> None:
        """Whether the account bills past its quota, and whether one response was billed so."""
        ...

    def failed(self, connection_id: str, failure: Failure, now: float) -> None:
        """An attempt failed."""
        ...

    def succeeded(self, connection_id: str) -> None:
        """An attempt succeeded."""
        ...


class QuotaVerifier(Protocol):
    """Makes sure connections have a fresh reading before a fail-closed decision."""

    async def verify(self, connection_ids: Iterable[str]) -> None:
        """Refresh, within a short deadline, the readings of `connection_ids` that lack one."""
        ...


class NoTelemetry:
    """Knows nothing and remembers nothing: every reading is missing and no spend is known.

    `auto/thrifty` then drops nothing (missing telemetry admits), and `auto/subscription`
    admits nothing (an unverified plan is never used).
    """

    def connection_states(self, now: float) -> Mapping[str, ConnectionState]:
        """No states."""
        return {}

    def observe(self, connection_id: str, windows: Iterable[QuotaWindow], now: float) -> None:
        """Forget the windows."""

    def observe_overage(
        self, connection_id: str, permitted: bool, in_use: bool | None = None
    ) -> None:
        """Forget the overage."""

    def failed(self, connection_id: str, failure: Failure, now: float) -> None:
        """Forget the failure."""

    def succeeded(self, connection_id: str) -> None:
        """Forget the success."""

    async def verify(self, connection_ids: Iterable[str]) -> None:
        """Nothing to refresh from."""
