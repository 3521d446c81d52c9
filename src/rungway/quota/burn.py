"""Burn rates: how fast each quota window of each connection fills, and when it runs out.

A `BurnBook` keeps a short history of readings per (connection, window): a reading is
a window's used share at an instant. The history is bounded twice: at most
`max_readings`, and nothing older than `span_s` before the newest reading (the two newest
always stay, so a quiet account keeps a rate). Readings closer together than `min_gap_s`
replace one another, so a burst of answers does not push the older readings out. A
window's reset starts a new history: the reset instant moves, the used share falls, or the
reading comes after the reset the history was counting towards.

The functions here are pure, with time as an argument; the book is a plain dictionary of
histories, fed by the quota board wherever it records a reading.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from rungway.routing.snapshot import QuotaWindow, WindowStatus

HOUR_S = 3600.0
# Providers that send a reset as seconds from now move it by a second or two from answer
# to answer; a move this large is another window period.
RESET_TOLERANCE_S = 90.0
# A share that falls by more than rounding is a reset the reading did not otherwise show.
USED_TOLERANCE = 0.5


class Reading(NamedTuple):
    """One window's used share at one instant, and the reset it counted towards (a named
    tuple: one is made per window of every answer, and a frozen dataclass costs more)."""

    at: float
    used_percent: float
    resets_at: float | None


@dataclass(frozen=True, slots=True)
class HistoryBounds:
    """How much history a window keeps."""

    max_readings: int = 16
    span_s: float = 3600.0
    min_gap_s: float = 30.0


class Outlook(StrEnum):
    """What a window's rate says of its future."""

    EXHAUSTED = "exhausted"
    """Spent now (refused, or at 100%)."""
    RUNS_OUT = "runs_out"
    """At the current rate it is spent before it resets (or it names no reset)."""
    NOT_BEFORE_RESET = "not_before_reset"
    """At the current rate it resets first."""
    UNKNOWN = "unknown"
    """Fewer than two readings of this window period, or its reset has passed."""


@dataclass(frozen=True, slots=True)
class Forecast:
    """A window's outlook and the instant it refers to (its exhaustion or its reset)."""

    outlook: Outlook
    at: float | None


def starts_new_period(last: Reading, reading: Reading) -> bool:
    """Whether `reading` belongs to a later window period than `last`."""
    if last.resets_at is not None and reading.at >= last.resets_at:
        return True
    if (
        last.resets_at is not None
        and reading.resets_at is not None
        and abs(reading.resets_at - last.resets_at) > RESET_TOLERANCE_S
    ):
        return True
    return reading.used_percent < last.used_percent - USED_TOLERANCE


def add_reading(
    history: tuple[Reading, ...], reading: Reading, bounds: HistoryBounds = HistoryBounds()
) -> tuple[Reading, ...]:
    """The history with `reading` added, bounded, or begun again at a reset."""
    if not history:
        return (reading,)
    last = history[-1]
    if reading.at < last.at:
        return history  # an older reading (a replica's, late) says nothing new
    if starts_new_period(last, reading):
        return (reading,)
    if len(history) >= 2 and reading.at - history[-2].at < bounds.min_gap_s:
        kept = (*history[:-1], reading)
    else:
        kept = (*history, reading)
    oldest_wanted = reading.at - bounds.span_s
    if len(kept) <= bounds.max_readings and kept[0].at >= oldest_wanted:
        return kept
    start = max(0, len(kept) - bounds.max_readings)
    while start < len(kept) - 2 and kept[start].at < oldest_wanted:
        start += 1
    return kept[start:]


def burn_rate(history: tuple[Reading, ...]) -> float | None:
    """Percent of the window used per hour, from the oldest to the newest reading; None
    with fewer than two readings or no time between them."""
    if len(history) < 2:
        return None
    first, last = history[0], history[-1]
    elapsed = last.at - first.at
    if elapsed <= 0:
        return None
    return max(0.0, (last.used_percent - first.used_percent) / elapsed * HOUR_S)


def forecast(history: tuple[Reading, ...], now: float) -> Forecast:
    """When the window runs out at its current rate, or that it resets first."""
    if not history:
        return Forecast(Outlook.UNKNOWN, None)
    last = history[-1]
    resets_at = last.resets_at
    if resets_at is not None and resets_at <= now:
        return Forecast(Outlook.UNKNOWN, None)
    if last.used_percent >= 100.0:
        return Forecast(Outlook.EXHAUSTED, resets_at)
    rate = burn_rate(history)
    if rate is None:
        return Forecast(Outlook.UNKNOWN, None)
    if rate <= 0:
        return Forecast(Outlook.NOT_BEFORE_RESET, resets_at)
    runs_out = last.at + (100.0 - last.used_percent) / rate * HOUR_S
    if resets_at is not None and runs_out >= resets_at:
        return Forecast(Outlook.NOT_BEFORE_RESET, resets_at)
    return Forecast(Outlook.RUNS_OUT, max(runs_out, now))


@dataclass(frozen=True, slots=True)
class WindowBurn:
    """One window of a connection: its last reading, rate and forecast."""

    window: QuotaWindow
    rate_per_hour: float | None
    forecast: Forecast


def binding(burns: Iterable[WindowBurn]) -> WindowBurn | None:
    """The window that stops the account first: a spent one (the latest to reset), else the
    soonest to run out, else one that resets first; None when no window tells."""
    burns = list(burns)
    spent = [b for b in burns if b.forecast.outlook is Outlook.EXHAUSTED]
    if spent:
        return max(spent, key=lambda b: b.forecast.at or float("inf"))
    running = [b for b in burns if b.forecast.outlook is Outlook.RUNS_OUT]
    if running:
        return min(running, key=lambda b: b.forecast.at or 0.0)
    resting = [b for b in burns if b.forecast.outlook is Outlook.NOT_BEFORE_RESET]
    if resting:
        return min(resting, key=lambda b: b.forecast.at or float("inf"))
    return None


class BurnBook:
    """The bounded reading histories of every connection's windows.

    On the request path a reading costs a dictionary lookup and a few comparisons: one less
    than `min_gap_s` after the newest kept reading of the same period (its reset the same,
    or moved by less than `RESET_TOLERANCE_S`) is not kept, since the board holds it as the
    window's current reading, which `burns` takes as the newest.
    """

    def __init__(self, bounds: HistoryBounds = HistoryBounds()) -> None:
        self._bounds = bounds
        self._gap = bounds.min_gap_s
        self._histories: dict[tuple[str, str, str | None], tuple[Reading, ...]] = {}

    def record(self, connection_id: str, window: QuotaWindow, at: float) -> None:
        """Add one reading of a window; a reading without a used share is left out."""
        used = window.used_percent
        if used is None:
            return
        key = (connection_id, window.name, window.model)
        history = self._histories.get(key)
        if history is not None:
            last = history[-1]
            if 0.0 <= at - last.at < self._gap and used >= last.used_percent:
                resets_at, last_reset = window.resets_at, last.resets_at
                if resets_at == last_reset:
                    return
                # A reset given as seconds from now moves a little from answer to answer:
                # still the same period (`starts_new_period`), so still not kept.
                if (
                    resets_at is not None
                    and last_reset is not None
                    and at < last_reset
                    and abs(resets_at - last_reset) <= RESET_TOLERANCE_S
                ):
                    return
        reading = Reading(at, used, window.resets_at)
        self._histories[key] = add_reading(history or (), reading, self._bounds)

    def history(
        self, connection_id: str, name: str, model: str | None = None
    ) -> tuple[Reading, ...]:
        """The kept readings of one window, oldest first."""
        return self._histories.get((connection_id, name, model), ())

    def burns(
        self, connection_id: str, windows: Iterable[QuotaWindow], now: float
    ) -> list[WindowBurn]:
        """Each of the connection's current windows with its rate and forecast at `now`,
        the window's current reading taken as the newest of its history."""
        found = []
        for window in windows:
            history = self.history(connection_id, window.name, window.model)
            if window.used_percent is not None:
                current = Reading(window.checked_at, window.used_percent, window.resets_at)
                history = add_reading(history, current, self._bounds)
            ahead = forecast(history, now)
            if window.status is WindowStatus.REJECTED:
                # A refusal may carry no used share: the window is spent until its reset.
                passed = window.resets_at is not None and window.resets_at <= now
                ahead = Forecast(Outlook.UNKNOWN if passed else Outlook.EXHAUSTED, window.resets_at)
            over = window.resets_at is not None and window.resets_at <= now
            found.append(WindowBurn(window, None if over else burn_rate(history), ahead))
        return found
