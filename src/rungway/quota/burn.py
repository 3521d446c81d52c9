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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from rungway.routing.snapshot import QuotaWindow, WindowStatus

HOUR_S = 3600.0
# Providers that send a reset as seconds from now move it by a second or two from answer
# to answer; a move this large is another window period.
RESET_TOLERANCE_S = 90.0
# A share that falls by more than rounding is a reset the reading did not otherwise show.
USED_TOLERANCE = 0.5

WindowKey = tuple[str, str | None]
"""A window's name and the model it is scoped to (None for the whole account)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One window's used share at one instant, and the reset it counted towards."""

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
    kept = list(history)
    if len(kept) >= 2 and reading.at - kept[-2].at < bounds.min_gap_s:
        kept[-1] = reading
    else:
        kept.append(reading)
    oldest_wanted = reading.at - bounds.span_s
    while len(kept) > 2 and (len(kept) > bounds.max_readings or kept[0].at < oldest_wanted):
        del kept[0]
    return tuple(kept)


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
    """The bounded reading histories of every connection's windows."""

    def __init__(self, bounds: HistoryBounds = HistoryBounds()) -> None:
        self._bounds = bounds
        self._histories: dict[str, dict[WindowKey, tuple[Reading, ...]]] = {}

    def record(self, connection_id: str, window: QuotaWindow, at: float) -> None:
        """Add one reading of a window; a reading without a used share is left out."""
        if window.used_percent is None:
            return
        windows = self._histories.setdefault(connection_id, {})
        key = (window.name, window.model)
        reading = Reading(at, window.used_percent, window.resets_at)
        windows[key] = add_reading(windows.get(key, ()), reading, self._bounds)

    def history(
        self, connection_id: str, name: str, model: str | None = None
    ) -> tuple[Reading, ...]:
        """The kept readings of one window, oldest first."""
        return self._histories.get(connection_id, {}).get((name, model), ())

    def burns(
        self, connection_id: str, windows: Iterable[QuotaWindow], now: float
    ) -> list[WindowBurn]:
        """Each of the connection's current windows with its rate and forecast at `now`."""
        kept: Mapping[WindowKey, tuple[Reading, ...]] = self._histories.get(connection_id, {})
        found = []
        for window in windows:
            history = kept.get((window.name, window.model), ())
            ahead = forecast(history, now)
            if window.status is WindowStatus.REJECTED:
                # A refusal may carry no used share: the window is spent until its reset.
                passed = window.resets_at is not None and window.resets_at <= now
                ahead = Forecast(Outlook.UNKNOWN if passed else Outlook.EXHAUSTED, window.resets_at)
            over = window.resets_at is not None and window.resets_at <= now
            found.append(WindowBurn(window, None if over else burn_rate(history), ahead))
        return found
