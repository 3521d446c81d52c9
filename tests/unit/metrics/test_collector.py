"""Scrape-time gauges: quota windows, cooldowns, breakers and budgets from a crafted board."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from rungway.clock import FakeClock
from rungway.metrics.collector import StateCollector
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.board import QuotaBoard
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import QuotaWindow, RungSpend

NOW = 1_790_000_000.0
LADDER = LadderSettings(rung_budget_usd={"cheap": 5.0, "premium": 0.0})


def _scrape(
    board: QuotaBoard, clock: FakeClock, spend: Mapping[Rung, RungSpend]
) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(
        StateCollector(
            connection_ids=["plan", "api", "cheap"],
            state=board,
            clock=clock,
            ladder=LADDER,
            rung_spend=lambda now: spend,
        )
    )
    return registry


def test_quota_windows_show_what_is_left_and_when_they_reset() -> None:
    clock = FakeClock(NOW)
    board = QuotaBoard(LADDER)
    board.observe(
        "plan",
        [
            QuotaWindow("5h", used_percent=62.5, resets_at=NOW + 3600, checked_at=NOW),
            QuotaWindow("7d_opus", 99.0, NOW + 86400, NOW, model="claude-opus-4-1"),
            QuotaWindow("7d", used_percent=None, resets_at=None, checked_at=NOW),
        ],
        NOW,
    )
    clock.advance(600)
    registry = _scrape(board, clock, {})
    five = {"connection": "plan", "window": "5h", "model": ""}
    opus = {"connection": "plan", "window": "7d_opus", "model": "claude-opus-4-1"}
    unread = {"connection": "plan", "window": "7d", "model": ""}
    assert registry.get_sample_value("rungway_quota_remaining_percent", five) == 37.5
    assert registry.get_sample_value("rungway_quota_reset_seconds", five) == 3000
    assert registry.get_sample_value("rungway_quota_remaining_percent", opus) == 1.0
    assert registry.get_sample_value("rungway_quota_reset_seconds", opus) == 86400 - 600
    # A window that gave neither figure shows no guess.
    assert registry.get_sample_value("rungway_quota_remaining_percent", unread) is None
    assert registry.get_sample_value("rungway_quota_reset_seconds", unread) is None
    clock.advance(3600)
    assert registry.get_sample_value("rungway_quota_reset_seconds", five) == 0


def test_cooldowns_and_breakers_are_read_at_each_scrape() -> None:
    clock = FakeClock(NOW)
    board = QuotaBoard(LADDER)
    registry = _scrape(board, clock, {})
    for connection in ("plan", "api", "cheap"):
        assert registry.get_sample_value("rungway_cooldown_active", {"connection": connection}) == 0
        assert registry.get_sample_value("rungway_breaker_state", {"connection": connection}) == 0
    board.failed("plan", Failure(FailureClass.OVERLOADED, "busy", 529, retry_after_s=60), NOW)
    for _ in range(5):
        board.failed("api", Failure(FailureClass.SERVER, "boom", 500), NOW)
    assert registry.get_sample_value("rungway_cooldown_active", {"connection": "plan"}) == 1
    assert registry.get_sample_value("rungway_breaker_state", {"connection": "api"}) == 2
    assert registry.get_sample_value("rungway_breaker_state", {"connection": "cheap"}) == 0
    clock.advance(3600)
    assert registry.get_sample_value("rungway_cooldown_active", {"connection": "plan"}) == 0
    assert registry.get_sample_value("rungway_breaker_state", {"connection": "api"}) == 1


def test_budget_remaining_is_the_budget_less_spent_and_held() -> None:
    spend = {Rung.CHEAP: RungSpend(spent_usd=1.25, reserved_usd=0.5), Rung.PREMIUM: RungSpend(0.3)}
    registry = _scrape(QuotaBoard(LADDER), FakeClock(NOW), spend)
    assert registry.get_sample_value("rungway_budget_remaining_usd", {"rung": "cheap"}) == 3.25
    # A disabled rung (budget 0) has nothing left, never a negative amount.
    assert registry.get_sample_value("rungway_budget_remaining_usd", {"rung": "premium"}) == 0
    # A rung without a budget has no gauge.
    assert registry.get_sample_value("rungway_budget_remaining_usd", {"rung": "free"}) is None
