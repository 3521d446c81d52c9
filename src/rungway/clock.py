"""Clocks: the one source of "now" for code that must not read the system clock directly.

Routing, quota and the simulated upstreams take a `Clock` so that tests and scenarios can
move time forward (a window reset) without sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the current time as epoch seconds."""

    def now(self) -> float:
        """Return the current time in seconds since the epoch."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> float:
        """Return `time.time()`."""
        return time.time()


class FakeClock:
    """A clock that moves only when told to; safe to share between threads."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return the clock's current reading."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by `seconds` and return the new reading."""
        if seconds < 0:
            raise ValueError("a clock cannot move backwards")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, epoch_seconds: float) -> None:
        """Jump the clock to `epoch_seconds` (never backwards)."""
        with self._lock:
            if epoch_seconds < self._now:
                raise ValueError("a clock cannot move backwards")
            self._now = epoch_seconds
