"""Rung budgets in one process: holds, settling, release, expiry and periods."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from rungway.budget import (
    KeyBudget,
    LocalBudget,
    Reservation,
    ReservationLog,
    Shortfall,
    period_start,
)
from rungway.budget.local import Grouping
from rungway.budget.period import period_bounds
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import RungSpend

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()
# Premium without a limit: the key-budget cases hold against the key alone there.
SETTINGS = LadderSettings(rung_budget_usd={"cheap": 1.0, "premium": None})


def _budget(
    seed: dict[str, float] | None = None,
    *,
    settings: LadderSettings = SETTINGS,
    keys: tuple[KeyBudget, ...] = (),
    log: ReservationLog | None = None,
) -> LocalBudget:
    def spent_since(since: float, by: Grouping) -> dict[str, float]:
        return {
            name.removeprefix(f"{by}:"): spent
            for name, spent in (seed or {}).items()
            if name.startswith(f"{by}:")
        }

    return LocalBudget(settings, spent_since, keys=keys, log=log)


def test_holds_fill_a_budget_and_no_further() -> None:
    budget = _budget()
    holds = [asyncio.run(budget.reserve(Rung.CHEAP, None, 0.3, NOW)) for _ in range(4)]
    assert [isinstance(hold, Reservation) for hold in holds] == [True, True, True, False]
    spend = budget.rung_spend(NOW)[Rung.CHEAP]
    assert spend.spent_usd == 0.0
    assert spend.reserved_usd == pytest.approx(0.9)


def test_settling_replaces_the_hold_with_the_real_cost() -> None:
    budget = _budget()
    hold = asyncio.run(budget.reserve(Rung.CHEAP, None, 0.9, NOW))
    assert isinstance(hold, Reservation)
    assert isinstance(asyncio.run(budget.reserve(Rung.CHEAP, None, 0.2, NOW)), Shortfall)
    budget.settle(hold, 0.05, NOW)
    assert budget.rung_spend(NOW)[Rung.CHEAP] == RungSpend(0.05, 0.0)
    assert isinstance(asyncio.run(budget.reserve(Rung.CHEAP, None, 0.9, NOW)), Reservation)


def test_a_released_hold_costs_nothing() -> None:
    budget = _budget()
    hold = asyncio.run(budget.reserve(Rung.CHEAP, None, 1.0, NOW))
    assert isinstance(hold, Reservation)
    budget.release(hold)
    assert budget.rung_spend(NOW) == {}
    assert isinstance(asyncio.run(budget.reserve(Rung.CHEAP, None, 1.0, NOW)), Reservation)


def test_an_orphaned_hold_expires() -> None:
    budget = _budget(settings=SETTINGS.model_copy(update={"reservation_ttl_s": 60}))
    assert isinstance(asyncio.run(budget.reserve(Rung.CHEAP, None, 1.0, NOW)), Reservation)
    assert isinstance(asyncio.run(budget.reserve(Rung.CHEAP, None, 0.1, NOW + 59)), Shortfall)
    assert isinstance(asyncio.run(budget.reserve(Rung.CHEAP, None, 0.1, NOW + 60)), Reservation)


def test_spend_is_seeded_from_the_ledger_and_starts_over_each_period() -> None:
    budget = _budget({"rung:cheap": 0.95, "rung:premium": 3.0})
    assert isinstance(asyncio.run(budget.reserve(Rung.CHEAP, None, 0.1, NOW)), Shortfall)
    assert budget.rung_spend(NOW)[Rung.PREMIUM] == RungSpend(3.0, 0.0)
    # A rung without a budget takes anything.
    assert asyncio.run(budget.reserve(Rung.PREMIUM, None, 100.0, NOW)) is None
    next_month = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    fresh = LocalBudget(SETTINGS, lambda since, by: {} if since >= next_month else {"cheap": 0.95})
    assert isinstance(asyncio.run(fresh.reserve(Rung.CHEAP, None, 0.1, NOW)), Shortfall)
    assert isinstance(asyncio.run(fresh.reserve(Rung.CHEAP, None, 0.1, next_month)), Reservation)


def test_a_hold_from_last_period_settles_nothing_into_this_one() -> None:
    budget = _budget()
    hold = asyncio.run(budget.reserve(Rung.CHEAP, None, 0.5, NOW))
    assert isinstance(hold, Reservation)
    next_month = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    budget.settle(hold, 0.5, next_month)
    assert budget.rung_spend(next_month).get(Rung.CHEAP, RungSpend(0.0)) == RungSpend(0.0, 0.0)


@pytest.mark.parametrize(
    ("period", "expected"),
    [
        ("day", datetime(2026, 12, 3, tzinfo=UTC)),
        ("week", datetime(2026, 11, 30, tzinfo=UTC)),  # the Monday
        ("month", datetime(2026, 12, 1, tzinfo=UTC)),
    ],
)
def test_periods_start_in_utc(period: str, expected: datetime) -> None:
    assert period_start(period, NOW) == expected.timestamp()  # type: ignore[arg-type]


KEYS = (KeyBudget("alice", 0.5, "day"),)


def test_a_key_budget_caps_the_key_on_every_paid_rung() -> None:
    budget = _budget(keys=KEYS)
    cheap = asyncio.run(budget.reserve(Rung.CHEAP, "alice", 0.3, NOW))
    assert isinstance(cheap, Reservation)
    refused = asyncio.run(budget.reserve(Rung.PREMIUM, "alice", 0.3, NOW))
    assert refused == Shortfall("key", "alice", 0.5, "day", period_bounds("day", NOW)[1])
    # Other keys and requests without a key are not held to alice's budget.
    assert asyncio.run(budget.reserve(Rung.PREMIUM, "bob", 0.3, NOW)) is None
    assert asyncio.run(budget.reserve(Rung.PREMIUM, None, 0.3, NOW)) is None
    budget.settle(cheap, 0.1, NOW)
    assert budget.key_spend("alice", NOW) == RungSpend(0.1, 0.0)
    assert isinstance(asyncio.run(budget.reserve(Rung.PREMIUM, "alice", 0.3, NOW)), Reservation)


def test_the_rung_budget_is_checked_before_the_key_budget() -> None:
    budget = _budget(keys=KEYS)
    refused = asyncio.run(budget.reserve(Rung.CHEAP, "alice", 1.5, NOW))
    assert isinstance(refused, Shortfall)
    assert refused.account == "rung"


def test_a_key_starts_each_of_its_own_periods_from_the_ledger() -> None:
    budget = _budget({"key:alice": 0.45, "rung:cheap": 0.45}, keys=KEYS)
    assert isinstance(asyncio.run(budget.reserve(Rung.PREMIUM, "alice", 0.1, NOW)), Shortfall)
    assert budget.key_spend("bob", NOW) is None


class _Log:
    def __init__(self) -> None:
        self.open: set[int] = set()

    def opened(self, reservation: Reservation) -> None:
        self.open.add(reservation.id)

    def closed(self, reservation_id: int) -> None:
        self.open.remove(reservation_id)


def test_reservations_are_written_down_before_use_and_struck_out_after() -> None:
    log = _Log()
    budget = _budget(settings=SETTINGS.model_copy(update={"reservation_ttl_s": 60}), log=log)
    kept, given_back, left = (
        asyncio.run(budget.reserve(Rung.CHEAP, None, 0.1, NOW)) for _ in range(3)
    )
    assert isinstance(kept, Reservation)
    assert isinstance(given_back, Reservation)
    assert isinstance(left, Reservation)
    assert log.open == {kept.id, given_back.id, left.id}
    budget.release(given_back)
    assert given_back.id not in log.open
    # Settling leaves the entry to the ledger, which strikes it out with the row it writes.
    budget.settle(kept, 0.05, NOW)
    assert kept.id in log.open
    budget.rung_spend(NOW + 60)
    assert left.id not in log.open
