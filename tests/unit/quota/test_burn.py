"""Burn rates: bounded reading histories, a reset starting a new one, and forecasts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rungway.protocol.failures import Failure, FailureClass
from rungway.quota.board import QuotaBoard
from rungway.quota.burn import (
    BurnBook,
    Forecast,
    HistoryBounds,
    Outlook,
    Reading,
    WindowBurn,
    add_reading,
    binding,
    burn_rate,
    forecast,
)
from rungway.quota.store import SavedConnection
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import ConnectionState, QuotaWindow, WindowStatus

NOW = 1_790_000_000.0
RESET = NOW + 5 * 3600.0
BOUNDS = HistoryBounds(max_readings=4, span_s=3600.0, min_gap_s=30.0)


def grow(*readings: Reading, bounds: HistoryBounds = BOUNDS) -> tuple[Reading, ...]:
    history: tuple[Reading, ...] = ()
    for reading in readings:
        history = add_reading(history, reading, bounds)
    return history


def test_the_rate_is_the_share_used_per_hour_between_the_oldest_and_newest_reading() -> None:
    history = grow(Reading(NOW, 10.0, RESET), Reading(NOW + 1800, 25.0, RESET))
    assert burn_rate(history) == pytest.approx(30.0)


def test_one_reading_or_no_time_between_readings_gives_no_rate() -> None:
    assert burn_rate(grow(Reading(NOW, 10.0, RESET))) is None
    assert burn_rate((Reading(NOW, 10.0, RESET), Reading(NOW, 12.0, RESET))) is None
    assert burn_rate(()) is None


def test_the_history_keeps_at_most_max_readings_and_the_newest() -> None:
    readings = [Reading(NOW + 60 * i, float(i), RESET) for i in range(10)]
    history = grow(*readings)
    assert history == tuple(readings[-4:])


def test_the_history_forgets_readings_older_than_its_span_but_keeps_a_pair() -> None:
    bounds = HistoryBounds(max_readings=100, span_s=600.0, min_gap_s=1.0)
    readings = [Reading(NOW + 100 * i, float(i), RESET) for i in range(20)]
    history = grow(*readings, bounds=bounds)
    assert history[0].at >= history[-1].at - 600
    assert history[-1] == readings[-1]
    # A quiet account: two readings an afternoon apart still give a rate.
    quiet = grow(Reading(NOW, 10.0, RESET), Reading(NOW + 7200, 30.0, RESET), bounds=bounds)
    assert len(quiet) == 2
    assert burn_rate(quiet) == pytest.approx(10.0)


def test_readings_closer_than_the_gap_replace_the_newest_instead_of_piling_up() -> None:
    history = grow(
        Reading(NOW, 10.0, RESET),
        Reading(NOW + 5, 11.0, RESET),
        Reading(NOW + 10, 12.0, RESET),
        Reading(NOW + 15, 13.0, RESET),
    )
    # The oldest is kept, so a burst does not shrink the span the rate is measured over.
    assert history == (Reading(NOW, 10.0, RESET), Reading(NOW + 15, 13.0, RESET))


def test_an_older_reading_arriving_late_changes_nothing() -> None:
    history = grow(Reading(NOW, 10.0, RESET), Reading(NOW + 600, 20.0, RESET))
    assert add_reading(history, Reading(NOW + 300, 50.0, RESET), BOUNDS) == history


@pytest.mark.parametrize(
    "after_reset",
    [
        Reading(RESET + 1, 40.0, RESET + 5 * 3600),  # read after the reset it counted to
        Reading(NOW + 900, 40.0, NOW + 4 * 3600),  # the reset moved: a new period
        Reading(NOW + 900, 2.0, RESET),  # the used share fell
    ],
)
def test_a_reset_starts_a_new_history(after_reset: Reading) -> None:
    history = grow(Reading(NOW, 10.0, RESET), Reading(NOW + 600, 30.0, RESET))
    assert add_reading(history, after_reset, BOUNDS) == (after_reset,)


def test_a_reset_instant_that_jitters_by_a_second_is_the_same_period() -> None:
    history = grow(Reading(NOW, 10.0, RESET), Reading(NOW + 600, 20.0, RESET + 1))
    assert len(history) == 2


def test_the_forecast_is_when_the_window_reaches_100_percent_at_the_current_rate() -> None:
    # 20% an hour from 40%: 60% left, three hours, before the reset five hours away.
    history = grow(Reading(NOW, 20.0, RESET), Reading(NOW + 3600, 40.0, RESET))
    assert forecast(history, NOW + 3600) == Forecast(Outlook.RUNS_OUT, NOW + 4 * 3600)


def test_a_window_that_resets_before_it_runs_out_says_so_and_names_its_reset() -> None:
    history = grow(Reading(NOW, 10.0, RESET), Reading(NOW + 3600, 12.0, RESET))
    assert forecast(history, NOW + 3600) == Forecast(Outlook.NOT_BEFORE_RESET, RESET)
    idle = grow(Reading(NOW, 10.0, RESET), Reading(NOW + 3600, 10.0, RESET))
    assert forecast(idle, NOW + 3600) == Forecast(Outlook.NOT_BEFORE_RESET, RESET)


def test_a_window_without_a_reset_instant_runs_out_whatever_the_rate() -> None:
    history = grow(Reading(NOW, 10.0, None), Reading(NOW + 3600, 11.0, None))
    assert forecast(history, NOW + 3600) == Forecast(Outlook.RUNS_OUT, NOW + 3600 + 89 * 3600)


def test_a_full_window_is_exhausted_until_its_reset_and_unknown_after_it() -> None:
    history = grow(Reading(NOW, 90.0, RESET), Reading(NOW + 600, 100.0, RESET))
    assert forecast(history, NOW + 600) == Forecast(Outlook.EXHAUSTED, RESET)
    assert forecast(history, RESET) == Forecast(Outlook.UNKNOWN, None)
    assert forecast(grow(Reading(NOW, 10.0, RESET)), NOW) == Forecast(Outlook.UNKNOWN, None)


@given(
    st.lists(
        st.tuples(st.floats(0, 7200), st.floats(0, 100)),
        min_size=2,
        max_size=40,
    )
)
def test_a_forecast_of_running_out_is_never_past_the_reset_nor_before_now(
    points: list[tuple[float, float]],
) -> None:
    readings = sorted((Reading(NOW + at, used, RESET) for at, used in points), key=lambda r: r.at)
    history = grow(*readings)
    assert 1 <= len(history) <= BOUNDS.max_readings
    now = history[-1].at
    ahead = forecast(history, now)
    if ahead.outlook is Outlook.RUNS_OUT:
        assert ahead.at is not None
        assert now <= ahead.at < RESET
    rate = burn_rate(history)
    assert rate is None or rate >= 0


def _burn(outlook: Outlook, at: float | None, name: str) -> WindowBurn:
    return WindowBurn(QuotaWindow(name, 50.0, RESET, NOW), 1.0, Forecast(outlook, at))


def test_the_binding_window_is_a_spent_one_else_the_soonest_to_run_out() -> None:
    week = _burn(Outlook.RUNS_OUT, NOW + 7200, "7d")
    five = _burn(Outlook.RUNS_OUT, NOW + 3600, "5h")
    calm = _burn(Outlook.NOT_BEFORE_RESET, RESET, "opus")
    assert binding([week, five, calm]) is five
    spent = _burn(Outlook.EXHAUSTED, RESET, "7d")
    assert binding([five, spent]) is spent
    assert binding([calm]) is calm
    assert binding([_burn(Outlook.UNKNOWN, None, "5h")]) is None


def test_the_board_feeds_the_book_each_reading_it_records() -> None:
    board = QuotaBoard(LadderSettings())
    board.observe("plan", [QuotaWindow("5h", 10.0, RESET, NOW)], NOW)
    board.observe("plan", [QuotaWindow("5h", 40.0, RESET, NOW + 1800)], NOW + 1800)
    state = board.connection_states(NOW + 1800)["plan"]
    (burn,) = board.burn.burns("plan", state.windows, NOW + 1800)
    assert burn.rate_per_hour == pytest.approx(60.0)
    assert burn.forecast == Forecast(Outlook.RUNS_OUT, NOW + 1800 + 3600)


def test_the_board_feeds_the_book_what_another_replica_read() -> None:
    board = QuotaBoard(LadderSettings())
    for at, used in ((NOW, 10.0), (NOW + 3600, 30.0)):
        saved = SavedConnection(ConnectionState(windows=(QuotaWindow("5h", used, RESET, at),)))
        board.adopt("plan", saved, at)
    assert burn_rate(board.burn.history("plan", "5h")) == pytest.approx(20.0)


def test_a_refused_window_without_a_share_is_exhausted_until_its_reset() -> None:
    book = BurnBook()
    refused = QuotaWindow("5h", None, RESET, NOW, status=WindowStatus.REJECTED)
    book.record("plan", refused, NOW)
    assert book.history("plan", "5h") == ()
    (burn,) = book.burns("plan", [refused], NOW)
    assert burn.forecast == Forecast(Outlook.EXHAUSTED, RESET)
    (after,) = book.burns("plan", [refused], RESET + 1)
    assert after.forecast.outlook is Outlook.UNKNOWN


def test_a_board_failure_records_no_reading() -> None:
    board = QuotaBoard(LadderSettings())
    board.failed("plan", Failure(FailureClass.RATE_LIMITED, "slow down"), NOW)
    assert board.burn.history("plan", "5h") == ()


def test_a_burst_of_readings_keeps_one_and_the_current_reading_is_the_newest() -> None:
    book = BurnBook(BOUNDS)
    for offset, used in ((0, 10.0), (10, 12.0), (20, 14.0)):
        book.record("plan", QuotaWindow("5h", used, RESET, NOW + offset), NOW + offset)
    # Within the gap the board holds the newest reading; the book keeps the first.
    assert book.history("plan", "5h") == (Reading(NOW, 10.0, RESET),)
    current = QuotaWindow("5h", 14.0, RESET, NOW + 20)
    (burn,) = book.burns("plan", [current], NOW + 20)
    assert burn.rate_per_hour == pytest.approx(4.0 / 20 * 3600)
    # Past the gap the next reading is kept.
    book.record("plan", QuotaWindow("5h", 20.0, RESET, NOW + 40), NOW + 40)
    assert book.history("plan", "5h")[-1] == Reading(NOW + 40, 20.0, RESET)


def test_a_reading_of_a_new_period_inside_the_gap_starts_the_history_again() -> None:
    book = BurnBook(BOUNDS)
    book.record("plan", QuotaWindow("5h", 90.0, RESET, NOW), NOW)
    book.record("plan", QuotaWindow("5h", 1.0, RESET + 18000, NOW + 5), NOW + 5)
    assert book.history("plan", "5h") == (Reading(NOW + 5, 1.0, RESET + 18000),)


def test_a_burst_whose_reset_moves_by_seconds_keeps_one_reading_too() -> None:
    # A reset sent as seconds from now moves with each answer: the same period, so a burst
    # inside the gap costs the book a lookup, as a burst with a fixed reset does.
    book = BurnBook(BOUNDS)
    for offset, used in ((0, 10.0), (10, 12.0), (20, 14.0)):
        window = QuotaWindow("1m", used, NOW + 60 + offset, NOW + offset)
        book.record("key", window, NOW + offset)
    assert book.history("key", "1m") == (Reading(NOW, 10.0, NOW + 60),)
    current = QuotaWindow("1m", 14.0, NOW + 80, NOW + 20)
    (burn,) = book.burns("key", [current], NOW + 20)
    assert burn.rate_per_hour == pytest.approx(4.0 / 20 * 3600)


def test_a_reading_past_the_reset_inside_the_gap_starts_the_history_again() -> None:
    # Inside the gap and with a reset moved by less than the tolerance, a reading taken
    # after the reset the history counted towards still begins a new period.
    book = BurnBook(BOUNDS)
    book.record("key", QuotaWindow("1m", 50.0, NOW + 10, NOW), NOW)
    book.record("key", QuotaWindow("1m", 60.0, NOW + 70, NOW + 15), NOW + 15)
    assert book.history("key", "1m") == (Reading(NOW + 15, 60.0, NOW + 70),)
