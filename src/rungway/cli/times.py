"""Instants and durations as every command prints them: ISO 8601 in UTC, and `2h14m`."""

from __future__ import annotations

import datetime as dt

STALE = "stale; refreshed on next use"
"""How a quota window reads once its reset instant has passed: the reading is of a window
that is over, and the gateway reads the new one from the connection's next answer."""


def iso_time(epoch: float) -> str:
    """An instant as ISO 8601 in UTC to the second (`2026-12-03T14:05:00Z`), as the
    dashboard shows it."""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def countdown(until: float, now: float) -> str:
    """`in 2h14m`, `in 5m30s`, `in 40s`; `now` once the instant has come."""
    if int(until - now) <= 0:
        return "now"
    return f"in {time_left(until, now)}"


def reset_phrase(resets_at: float | None, now: float) -> str:
    """What a quota window line says of its reset: `, resets in 2h14m`, the stale note once
    the instant has passed, or nothing when the reset is unknown."""
    if not resets_at:
        return ""
    if resets_at <= now:
        return f", [dim]{STALE}[/]"
    return f", resets {countdown(resets_at, now)}"


def time_left(until: float, now: float) -> str:
    """`2h14m`, `5m30s`, `40s` (`0s` once the instant has come)."""
    seconds = max(0, int(until - now))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"
