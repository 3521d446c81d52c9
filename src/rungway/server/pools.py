"""The body of `GET /admin/pools`: each plan's accounts, grouped into pools.

A pool is the plans (subscription connections) of one provider, billing entry and owner.
Each account shows its quota windows with their burn rates (percent of the window per
hour, from the quota board's recent readings), the window that binds it and when that
window runs out at the current rate (or that it resets first), the sessions pinned to
it, and its share of cache hits today.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rungway.budget.period import Period, period_bounds
from rungway.ledger.report import LedgerUnavailable
from rungway.quota.burn import BurnBook, WindowBurn, binding
from rungway.routing.billing import BillingClass
from rungway.routing.snapshot import ConnectionState, Roster, RosterConnection
from rungway.server.spend import SpendSource

CACHE_PERIOD: Period = "day"


class PinCounts(Protocol):
    """Where the sessions pinned to each connection are counted."""

    def pinned_counts(self, now: float | None = None) -> dict[str, int]:
        """How many sessions each connection holds; with `now`, only pins still live."""
        ...


@dataclass(frozen=True, slots=True)
class PoolKey:
    """What makes two connections accounts of one pool."""

    provider: str
    billing_entry: str
    owner: str | None

    @property
    def label(self) -> str:
        """A short name: the provider, and the owner when the config names one."""
        return self.provider if self.owner is None else f"{self.provider}/{self.owner}"


def pool_key(connection: RosterConnection) -> PoolKey:
    """The pool a connection belongs to: its plan and its owner, as the ladder's pools."""
    return PoolKey(connection.provider, connection.billing.entry, connection.owner)


def pools_of(roster: Roster) -> dict[PoolKey, list[RosterConnection]]:
    """The plans of the roster grouped into pools, each in config order."""
    pools: dict[PoolKey, list[RosterConnection]] = {}
    for connection in roster.connections.values():
        if connection.billing.billing is BillingClass.SUBSCRIPTION:
            pools.setdefault(pool_key(connection), []).append(connection)
    return pools


class PoolsView:
    """Builds the `/admin/pools` body from the roster, the live state and the ledger."""

    def __init__(
        self,
        *,
        roster: Roster,
        ledger: SpendSource,
        burn: Callable[[], BurnBook | None],
        pins: Callable[[], PinCounts | None],
    ) -> None:
        self._pools = pools_of(roster)
        self._ledger = ledger
        self._burn = burn
        self._pins = pins

    async def body(self, states: Mapping[str, ConnectionState], now: float) -> dict[str, Any]:
        """The whole answer at `now`."""
        since, until = period_bounds(CACHE_PERIOD, now)
        shares: dict[str, float | None] = {}
        if self._pools:
            # Ledger reads touch the disk (and wait for queued rows): off the event loop.
            try:
                report = await asyncio.to_thread(
                    self._ledger.spend_report, since, until, "connection"
                )
            except LedgerUnavailable:
                # A shared ledger that does not answer leaves the shares unknown, not the
                # accounts' quota, which is this process's own.
                report = None
            if report is not None:
                shares = {row.group: row.cache_hit_share for row in report.rows}
        pins = self._pins()
        pinned = pins.pinned_counts(now) if pins is not None else None
        book = self._burn()
        return {
            "now": now,
            "cache_period": {"period": CACHE_PERIOD, "since": since, "until": until},
            "pinning": pinned is not None,
            "pools": [
                {
                    "pool": key.label,
                    "provider": key.provider,
                    "billing_entry": key.billing_entry,
                    "owner": key.owner,
                    "accounts": [
                        _account(
                            connection.id,
                            states.get(connection.id, ConnectionState()),
                            book=book,
                            pinned=None if pinned is None else pinned.get(connection.id, 0),
                            cache_hit_share=shares.get(connection.id),
                            now=now,
                        )
                        for connection in members
                    ],
                }
                for key, members in self._pools.items()
            ],
        }


def _account(
    connection_id: str,
    state: ConnectionState,
    *,
    book: BurnBook | None,
    pinned: int | None,
    cache_hit_share: float | None,
    now: float,
) -> dict[str, Any]:
    burns = (book or BurnBook()).burns(connection_id, state.windows, now)
    bound = binding(burns)
    return {
        "id": connection_id,
        "windows": [_window(burn) for burn in burns],
        "binding": None
        if bound is None
        else {
            "window": bound.window.name,
            "model": bound.window.model,
            "outlook": bound.forecast.outlook.value,
            "at": bound.forecast.at,
        },
        "pinned_sessions": pinned,
        "cache_hit_share": cache_hit_share,
        "cooldown_until": state.cooldown_until
        if state.cooldown_until is not None and state.cooldown_until > now
        else None,
        "disabled": state.disabled,
    }


def _window(burn: WindowBurn) -> dict[str, Any]:
    window = burn.window
    return {
        "name": window.name,
        "model": window.model,
        "used_percent": window.used_percent,
        "resets_at": window.resets_at,
        "status": window.status.value,
        "burn_per_hour": burn.rate_per_hour,
        "outlook": burn.forecast.outlook.value,
        "outlook_at": burn.forecast.at,
    }
