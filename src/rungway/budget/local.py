"""One gateway's budgets, kept in memory: settled spend and open reservations per account.

An account is a paid rung's budget (`ladder.rung_budget_usd`) or a client key's
(`client_keys[].budget_usd`). A reservation holds one attempt's worst-case cost against its
rung and, when the request came with a budgeted key, that key too. Reservation is a check
and an add on one event loop, so two requests can never both take the last of a budget.

Settled spend is seeded from the ledger at the start of each period, so a restart loses
nothing that was settled. Each reservation is also written to a `ReservationLog` before the
attempt is sent, with the request it is for; after a crash the ledger turns the log's open
reservations into rows of their own, counted at their ceiling, because their upstreams may
have billed them.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from rungway.budget.period import Period, period_bounds
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import RungSpend

Grouping = Literal["rung", "key"]
SpentSince = Callable[[float, Grouping], Mapping[str, float]]
"""Settled incremental cost since an instant, per rung label or per client key name."""


@dataclass(frozen=True, slots=True)
class UnrecordedCost:
    """A ledger row a crash left (`unrecorded`): its request's whole hold, counted as spent."""

    request_id: str
    rung: str | None
    client_key: str | None
    cost_usd: float
    started_at: float


@dataclass(frozen=True, slots=True)
class KeyBudget:
    """A client key's own budget."""

    name: str
    budget_usd: float
    period: Period


@dataclass(frozen=True, slots=True)
class HeldFor:
    """The request and route a reservation is for: what a crash's ledger row names."""

    request_id: str
    started_at: float
    api: str
    model: str
    connection_id: str
    provider: str
    upstream_model: str


@dataclass(slots=True)
class Reservation:
    """Money held for one attempt against its rung's budget and its client key's."""

    id: int
    rung: Rung
    client_key: str | None
    amount: float
    expires_at: float
    rung_period: float = float("nan")
    key_period: float = float("nan")
    held_for: HeldFor | None = None


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a reservation did not fit: whose budget, how large, for which period."""

    account: Literal["rung", "key"]
    name: str
    budget_usd: float
    period: Period
    resets_at: float
    fits_output: int | None = None
    """The most output tokens the request could have asked for and fit what is left of the
    budget (None when not worked out)."""
    available_usd: float | None = None
    """What was left of the budget, spent and held amounts taken off."""
    sets_output_limit: bool = True
    """Whether the request set its own output limit (`max_tokens` or alike); one that did not
    was held at its model's limit."""


class ReservationLog(Protocol):
    """Where reservations are written down so that a crash cannot forget them."""

    def opened(self, reservation: Reservation) -> None:
        """`reservation` is about to be relied on."""
        ...

    def closed(self, reservation_id: int) -> None:
        """The reservation was given back or has expired."""
        ...


class _Account:
    __slots__ = ("budget", "end", "period", "spent", "start")

    def __init__(self, budget: float | None, period: Period) -> None:
        self.budget = budget
        self.period = period
        self.start = self.end = float("-inf")
        self.spent = 0.0


class LocalBudget:
    """Budgets per paid rung and per client key, for one gateway process."""

    def __init__(
        self,
        settings: LadderSettings,
        spent_since: SpentSince,
        *,
        keys: Iterable[KeyBudget] = (),
        log: ReservationLog | None = None,
    ) -> None:
        self._settings = settings
        self._spent_since = spent_since
        self._ttl = settings.reservation_ttl_s
        self._log = log
        self._rungs = {
            rung: _Account(settings.budget_for(rung), settings.budget_period) for rung in Rung
        }
        self._keys = {key.name: _Account(key.budget_usd, key.period) for key in keys}
        self._open: dict[int, Reservation] = {}
        # Ids must not repeat across restarts: the log may still hold the last run's.
        self._ids = itertools.count(secrets.randbits(48) << 12)

    async def reserve(
        self,
        rung: Rung,
        client_key: str | None,
        amount: float,
        now: float,
        *,
        held_for: HeldFor | None = None,
    ) -> Reservation | Shortfall | None:
        """Hold `amount` against the rung's and the key's budgets, or say which cannot.

        None when neither has a budget: there is nothing to hold against, and the cost is
        counted when it is known (`spend`). It never waits: the check and the hold run in
        one step of the event loop.
        """
        account = self._rung_account(rung, now)
        key_account = self._key_account(client_key, now)
        if account.budget is None and (key_account is None or key_account.budget is None):
            return None
        self._expire(now)
        if account.budget is not None and self._committed(account, rung, None) + amount > (
            account.budget
        ):
            return _shortfall("rung", rung.label, account)
        if (
            key_account is not None
            and key_account.budget is not None
            and self._committed(key_account, None, client_key) + amount > key_account.budget
        ):
            assert client_key is not None
            return _shortfall("key", client_key, key_account)
        reservation = Reservation(
            next(self._ids),
            rung,
            client_key,
            amount,
            now + self._ttl,
            account.start,
            key_account.start if key_account is not None else float("nan"),
            held_for,
        )
        if self._log is not None:
            self._log.opened(reservation)
        self._open[reservation.id] = reservation
        return reservation

    def settle(self, reservation: Reservation, cost: float, now: float) -> None:
        """Replace the reservation with the request's real cost.

        The ledger closes the logged reservation in the same write as the request's row.
        """
        self._open.pop(reservation.id, None)
        account = self._rung_account(reservation.rung, now)
        if reservation.rung_period == account.start:
            account.spent += cost
        key_account = self._key_account(reservation.client_key, now)
        if key_account is not None and reservation.key_period == key_account.start:
            key_account.spent += cost

    def spend(
        self,
        rung: Rung,
        client_key: str | None,
        cost: float,
        now: float,
        *,
        request_id: str | None = None,
    ) -> None:
        """Count a cost that had no reservation (`request_id` names its request)."""
        self._rung_account(rung, now).spent += cost
        key_account = self._key_account(client_key, now)
        if key_account is not None:
            key_account.spent += cost

    def release(self, reservation: Reservation) -> None:
        """Give the reservation back: the attempt cost nothing."""
        if self._open.pop(reservation.id, None) is not None and self._log is not None:
            self._log.closed(reservation.id)

    def rung_spend(self, now: float) -> Mapping[Rung, RungSpend]:
        """Spent and reserved per rung in the current period."""
        self._expire(now)
        spend = {}
        for rung in Rung:
            account = self._rung_account(rung, now)
            reserved = self._reserved(rung, None)
            if account.spent or reserved:
                spend[rung] = RungSpend(account.spent, reserved)
        return spend

    def key_spend(self, client_key: str, now: float) -> RungSpend | None:
        """Spent and reserved by a budgeted key in its current period (None if unbudgeted)."""
        self._expire(now)
        account = self._key_account(client_key, now)
        if account is None:
            return None
        return RungSpend(account.spent, self._reserved(None, client_key))

    def prime(self, now: float) -> None:
        """Read every account's settled spend for its current period now, not on first use,
        and drop the reservations a crash left that have expired since."""
        self._expire(now)
        for rung in Rung:
            self._rung_account(rung, now)
        for name in self._keys:
            self._key_account(name, now)

    def _committed(self, account: _Account, rung: Rung | None, client_key: str | None) -> float:
        return account.spent + self._reserved(rung, client_key)

    def _reserved(self, rung: Rung | None, client_key: str | None) -> float:
        return sum(
            held.amount
            for held in self._open.values()
            if held.rung is rung or (client_key is not None and held.client_key == client_key)
        )

    def _expire(self, now: float) -> None:
        expired = [key for key, held in self._open.items() if held.expires_at <= now]
        for key in expired:
            del self._open[key]
            if self._log is not None:
                self._log.closed(key)

    def _rung_account(self, rung: Rung, now: float) -> _Account:
        account = self._rungs[rung]
        if not account.start <= now < account.end:
            # Every rung shares the ladder's period: one ledger read rolls them all.
            start, end = period_bounds(self._settings.budget_period, now)
            by_label = self._spent_since(start, "rung")
            for each, rolled in self._rungs.items():
                rolled.start, rolled.end = start, end
                rolled.spent = by_label.get(each.label, 0.0)
        return account

    def _key_account(self, client_key: str | None, now: float) -> _Account | None:
        account = self._keys.get(client_key) if client_key is not None else None
        if account is not None and not account.start <= now < account.end:
            assert client_key is not None
            account.start, account.end = period_bounds(account.period, now)
            account.spent = self._spent_since(account.start, "key").get(client_key, 0.0)
        return account


def _shortfall(kind: Literal["rung", "key"], name: str, account: _Account) -> Shortfall:
    assert account.budget is not None
    return Shortfall(kind, name, account.budget, account.period, account.end)
