"""Rung budgets in one process: holds, settling, release, expiry and periods."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rungway.budget import LocalBudget, period_start
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import RungSpend

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()
SETTINGS = LadderSettings(rung_budget_usd={"cheap": 1.0})


def _budget(seed: dict[str, float] | None = None, **kwargs: float) -> LocalBudget:
    seen: list[float] = []

    def spent_since(since: float) -> dict[str, float]:
        seen.append(since)
        return dict(seed or {})

    return LocalBudget(SETTINGS, spent_since, **kwargs)


def test_holds_fill_a_budget_and_no_further() -> None:
    budget = _budget()
    holds = [budget.reserve(Rung.CHEAP, 0.3, NOW) for _ in range(4)]
    assert [hold is not None for hold in holds] == [True, True, True, False]
    spend = budget.rung_spend(NOW)[Rung.CHEAP]
    assert spend.spent_usd == 0.0
    assert spend.reserved_usd == pytest.approx(0.9)


def test_settling_replaces_the_hold_with_the_real_cost() -> None:
    budget = _budget()
    hold = budget.reserve(Rung.CHEAP, 0.9, NOW)
    assert hold is not None
    assert budget.reserve(Rung.CHEAP, 0.2, NOW) is None
    budget.settle(hold, 0.05, NOW)
    assert budget.rung_spend(NOW)[Rung.CHEAP] == RungSpend(0.05, 0.0)
    assert budget.reserve(Rung.CHEAP, 0.9, NOW) is not None


def test_a_released_hold_costs_nothing() -> None:
    budget = _budget()
    hold = budget.reserve(Rung.CHEAP, 1.0, NOW)
    assert hold is not None
    budget.release(hold)
    assert budget.rung_spend(NOW) == {}
    assert budget.reserve(Rung.CHEAP, 1.0, NOW) is not None


def test_an_orphaned_hold_expires() -> None:
    budget = _budget(ttl_s=60)
    assert budget.reserve(Rung.CHEAP, 1.0, NOW) is not None
    assert budget.reserve(Rung.CHEAP, 0.1, NOW + 59) is None
    assert budget.reserve(Rung.CHEAP, 0.1, NOW + 60) is not None


def test_spend_is_seeded_from_the_ledger_and_starts_over_each_period() -> None:
    budget = _budget({"cheap": 0.95, "premium": 3.0})
    assert budget.reserve(Rung.CHEAP, 0.1, NOW) is None
    assert budget.rung_spend(NOW)[Rung.PREMIUM] == RungSpend(3.0, 0.0)
    # A rung without a budget takes anything.
    assert budget.reserve(Rung.PREMIUM, 100.0, NOW) is not None
    next_month = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    fresh = LocalBudget(SETTINGS, lambda since: {} if since >= next_month else {"cheap": 0.95})
    assert fresh.reserve(Rung.CHEAP, 0.1, NOW) is None
    assert fresh.reserve(Rung.CHEAP, 0.1, next_month) is not None


def test_a_hold_from_last_period_settles_nothing_into_this_one() -> None:
    budget = _budget()
    hold = budget.reserve(Rung.CHEAP, 0.5, NOW)
    assert hold is not None
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
