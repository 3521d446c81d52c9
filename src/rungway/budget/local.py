"""One gateway's budgets, kept in memory: settled spend per rung and open reservations.

Reservation is a check and an add on one event loop, so two requests can never both take
the last of a budget. Settled spend is seeded at start from the ledger, whose rows carry
each request's incremental cost, so a restart loses nothing that was settled. A
reservation lives only in this process: a crash drops it with the process, and one left
open by a lost request expires after `ttl_s`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rungway.budget.period import period_bounds
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import RungSpend

SpentSince = Callable[[float], Mapping[str, float]]
"""Settled incremental cost per rung label since an instant (the ledger's sums)."""


@dataclass(slots=True)
class Reservation:
    """Money held against one rung's budget for one attempt."""

    id: int
    rung: Rung
    amount: float
    period: float
    expires_at: float


class LocalBudget:
    """Budgets per rung for one gateway process."""

    def __init__(
        self, settings: LadderSettings, spent_since: SpentSince, *, ttl_s: float = 3600.0
    ) -> None:
        self._settings = settings
        self._spent_since = spent_since
        self._ttl = ttl_s
        self._period = float("-inf")
        self._period_end = float("-inf")
        self._spent: dict[Rung, float] = {}
        self._open: dict[int, Reservation] = {}
        self._ids = itertools.count(1)

    def reserve(self, rung: Rung, amount: float, now: float) -> Reservation | None:
        """Hold `amount` against `rung`'s budget, or None when it does not fit."""
        self._roll(now)
        budget = self._settings.budget_for(rung)
        if budget is not None and self._committed(rung, now) + amount > budget:
            return None
        reservation = Reservation(next(self._ids), rung, amount, self._period, now + self._ttl)
        self._open[reservation.id] = reservation
        return reservation

    def settle(self, reservation: Reservation, cost: float, now: float) -> None:
        """Replace the reservation with the request's real cost."""
        self._open.pop(reservation.id, None)
        self._roll(now)
        if reservation.period == self._period:
            self._spent[reservation.rung] = self._spent.get(reservation.rung, 0.0) + cost

    def spend(self, rung: Rung, cost: float, now: float) -> None:
        """Count a cost that had no reservation (a rung without a budget)."""
        self._roll(now)
        self._spent[rung] = self._spent.get(rung, 0.0) + cost

    def release(self, reservation: Reservation) -> None:
        """Give the reservation back: the attempt cost nothing."""
        self._open.pop(reservation.id, None)

    def rung_spend(self, now: float) -> Mapping[Rung, RungSpend]:
        """Spent and reserved per rung in the current period."""
        self._roll(now)
        rungs = set(self._spent) | {reservation.rung for reservation in self._open.values()}
        return {
            rung: RungSpend(self._spent.get(rung, 0.0), self._reserved(rung, now)) for rung in rungs
        }

    def _committed(self, rung: Rung, now: float) -> float:
        return self._spent.get(rung, 0.0) + self._reserved(rung, now)

    def _reserved(self, rung: Rung, now: float) -> float:
        expired = [key for key, held in self._open.items() if held.expires_at <= now]
        for key in expired:
            del self._open[key]
        return sum(held.amount for held in self._open.values() if held.rung is rung)

    def _roll(self, now: float) -> None:
        if self._period <= now < self._period_end:
            return
        self._period, self._period_end = period_bounds(self._settings.budget_period, now)
        by_label = self._spent_since(self._period)
        self._spent = {rung: by_label[rung.label] for rung in Rung if rung.label in by_label}
