"""Budget periods: a UTC day, an ISO week (from Monday) or a calendar month."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

Period = Literal["day", "week", "month"]


def period_start(period: Period, now: float) -> float:
    """The instant the budget period holding `now` began, in epoch seconds."""
    return period_bounds(period, now)[0]


def period_bounds(period: Period, now: float) -> tuple[float, float]:
    """The start and end of the budget period holding `now`, in epoch seconds."""
    moment = datetime.fromtimestamp(now, UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day.timestamp(), (day + timedelta(days=1)).timestamp()
    if period == "week":
        monday = day - timedelta(days=day.weekday())
        return monday.timestamp(), (monday + timedelta(days=7)).timestamp()
    first = day.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return first.timestamp(), following.timestamp()
