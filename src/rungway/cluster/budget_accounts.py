"""The budgets as a shared store keeps them: each one's Redis keys per period, and its
mirror; and which of them a hold, a cost or a crash row counts against."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from rungway.budget.local import Grouping, KeyBudget, Reservation, UnrecordedCost
from rungway.budget.period import Period, period_bounds
from rungway.cluster.budget_changes import Target
from rungway.cluster.link import RedisLink
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings

_RUNGS: Final = {rung.label: rung for rung in Rung}


class Account:
    """One budget's keys and its mirrored figures."""

    __slots__ = ("budget", "grouping", "holds", "name", "period", "reserved", "seen", "target")

    def __init__(
        self, link: RedisLink, grouping: Grouping, name: str, budget: float | None, period: Period
    ) -> None:
        self.grouping: Grouping = grouping
        self.name = name
        self.budget = budget
        self.period = period
        self.holds = link.key("budget", "holds", f"{grouping}:{name}")
        self.reserved = link.key("budget", "reserved", f"{grouping}:{name}")
        self.target = Target(grouping, name, float("-inf"), float("-inf"), "", "", "")
        self.seen = (float("nan"), 0.0, 0.0)
        """The mirror: the period start, its spend and the open holds, in US dollars."""

    def target_at(self, link: RedisLink, now: float) -> Target:
        """The keys of the period holding `now`."""
        target = self.target
        if not target.start <= now < target.end:
            target = self.target = self.target_of(link, period_bounds(self.period, now))
        return target

    def target_of(self, link: RedisLink, bounds: tuple[float, float]) -> Target:
        """The keys of the period `bounds`."""
        start, end = bounds
        spent = link.key("budget", "spent", f"{self.grouping}:{self.name}", str(int(start)))
        return Target(self.grouping, self.name, start, end, spent, self.holds, self.reserved)

    def figures(self, now_start: float) -> tuple[float, float]:
        """Spent and held in the period starting at `now_start`, as last mirrored."""
        start, spent, held = self.seen
        return (spent if start == now_start else 0.0), held


class Accounts:
    """Every budget of a gateway: one account per rung and per budgeted client key."""

    def __init__(self, link: RedisLink, settings: LadderSettings, keys: Iterable[KeyBudget]):
        self._link = link
        self.rungs = {
            rung: Account(
                link, "rung", rung.label, settings.budget_for(rung), settings.budget_period
            )
            for rung in Rung
        }
        self.keys = {
            key.name: Account(link, "key", key.name, key.budget_usd, key.period) for key in keys
        }

    def every(self) -> list[Account]:
        """Every account, rungs first."""
        return [*self.rungs.values(), *self.keys.values()]

    def targets(self, rung: Rung, client_key: str | None, now: float) -> tuple[Target, ...]:
        """The keys, in the period holding `now`, of the rung's account and the key's."""
        rung_target = self.rungs[rung].target_at(self._link, now)
        key = self.keys.get(client_key) if client_key is not None else None
        if key is None:
            return (rung_target,)
        return rung_target, key.target_at(self._link, now)

    def hold_targets(self, reservation: Reservation) -> tuple[Target, ...]:
        """The hold's accounts, each in the period it was taken in."""
        accounts = [self.rungs[reservation.rung]]
        starts = [reservation.rung_period]
        key = self.keys.get(reservation.client_key) if reservation.client_key else None
        if key is not None:
            accounts.append(key)
            starts.append(reservation.key_period)
        targets = []
        for account, start in zip(accounts, starts, strict=True):
            target = account.target
            if target.start != start:
                target = account.target_of(self._link, period_bounds(account.period, start))
            targets.append(target)
        return tuple(targets)

    def crash_targets(self, row: UnrecordedCost, now: float) -> tuple[Target, ...]:
        """The accounts a crash row counts against whose current period holds it."""
        accounts = []
        rung = _RUNGS.get(row.rung or "")
        if rung is not None:
            accounts.append(self.rungs[rung])
        key = self.keys.get(row.client_key) if row.client_key is not None else None
        if key is not None:
            accounts.append(key)
        return tuple(
            target
            for target in (each.target_at(self._link, now) for each in accounts)
            if target.start <= row.started_at
        )

    def mirror(self, targets: tuple[Target, ...], cost: float, held: float) -> None:
        """Add `cost` to the mirrored spend and `held` to the mirrored holds of `targets`."""
        for target in targets:
            if target.grouping == "rung":
                account = self.rungs[_RUNGS[target.name]]
            else:
                account = self.keys[target.name]
            start, spent, reserved = account.seen
            if start == target.start:
                account.seen = (start, spent + cost, max(0.0, reserved + held))
            else:
                account.seen = (start, spent, max(0.0, reserved + held))
