"""A quota board built again on its store starts where the last one stopped."""

from __future__ import annotations

from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.board import QuotaBoard
from rungway.quota.breaker import BreakerPolicy
from rungway.quota.store import MemoryStateStore
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import BreakerState, QuotaWindow

NOW = 1_790_000_000.0
KNOWN = ("plan", "api")
BAND = LadderSettings(exit_cutoff_percent=2, reentry_min_remaining_percent=5)


def restarted(store: MemoryStateStore, now: float, settings: LadderSettings = BAND) -> QuotaBoard:
    board = QuotaBoard(settings, store=store)
    board.restore(store.load(), now, KNOWN)
    return board


def test_a_disable_outlives_the_board_until_enabled() -> None:
    store = MemoryStateStore()
    QuotaBoard(BAND, store=store).disable("api")
    board = restarted(store, NOW + 86_400)
    assert board.connection_states(NOW + 86_400)["api"].disabled
    board.enable("api")
    assert "api" not in restarted(store, NOW + 86_400).connection_states(NOW + 86_400)


def test_a_cooldown_runs_to_its_end_and_an_ended_one_is_dropped() -> None:
    store = MemoryStateStore()
    board = QuotaBoard(BAND, store=store)
    board.failed("api", Failure(FailureClass.RATE_LIMITED, "slow down", 429, 600.0), NOW)
    state = restarted(store, NOW + 300).connection_states(NOW + 300)["api"]
    assert state.cooldown_until == NOW + 600
    assert state.cooldown_reason.startswith("rate_limited")
    assert "api" not in restarted(store, NOW + 601).connection_states(NOW + 601)
    assert "api" not in store.saved, "the store forgets what has expired"


def test_an_open_breaker_stays_open_until_its_end() -> None:
    store = MemoryStateStore()
    board = QuotaBoard(BAND, breakers=BreakerPolicy(threshold=2), store=store)
    for _ in range(2):
        board.failed("api", Failure(FailureClass.SERVER, "boom", 500), NOW)
    again = QuotaBoard(BAND, breakers=BreakerPolicy(threshold=2), store=store)
    again.restore(store.load(), NOW + 10, KNOWN)
    state = again.connection_states(NOW + 10)["api"]
    assert state.breaker is BreakerState.OPEN
    assert state.breaker_open_until == NOW + 30
    assert again.connection_states(NOW + 30)["api"].breaker is BreakerState.HALF_OPEN


def test_exhaustion_memory_outlives_the_board() -> None:
    store = MemoryStateStore()
    QuotaBoard(BAND, store=store).observe("plan", [QuotaWindow("7d", 99.0, NOW + 3600, NOW)], NOW)
    board = restarted(store, NOW + 60)
    board.observe("plan", [QuotaWindow("7d", 97.0, NOW + 3600, NOW + 60)], NOW + 60)
    assert board.connection_states(NOW + 60)["plan"].windows[0].was_exhausted, "3% is in the band"
    board.observe("plan", [QuotaWindow("7d", 94.0, NOW + 3600, NOW + 90)], NOW + 90)
    assert not board.connection_states(NOW + 90)["plan"].windows[0].was_exhausted


def test_a_window_whose_reset_passed_and_an_unknown_connection_are_dropped() -> None:
    store = MemoryStateStore()
    board = QuotaBoard(BAND, store=store)
    board.observe("plan", [QuotaWindow("5h", 99.0, NOW + 60, NOW)], NOW)
    board.observe("gone", [QuotaWindow("5h", 10.0, NOW + 3600, NOW)], NOW)
    assert set(store.saved) == {"plan", "gone"}
    states = restarted(store, NOW + 61).connection_states(NOW + 61)
    assert states == {}
    assert store.saved == {}
