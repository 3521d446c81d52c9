"""Requests per minute per client key (`client_keys[].requests_per_minute`).

Each limited key keeps the start times of its requests in the last 60 seconds, so the
limit holds over any 60-second span, not per calendar minute, and a refused client is told
exactly when a slot frees. The log lives in this process.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from rungway.clock import Clock

WINDOW_S = 60.0


class RequestRate:
    """The requests-per-minute limits of the client keys that have one."""

    def __init__(self, limits: Mapping[str, int], clock: Clock) -> None:
        self._limits = dict(limits)
        self._starts: dict[str, deque[float]] = {name: deque() for name in limits}
        self._clock = clock

    def limit(self, client_key: str) -> int | None:
        """The key's limit, or None when it has none."""
        return self._limits.get(client_key)

    def admit(self, client_key: str | None) -> float | None:
        """Count one request of `client_key`; or, when it is at its limit, count nothing
        and return the seconds until it may start another."""
        if client_key is None or client_key not in self._limits:
            return None
        starts = self._starts[client_key]
        now = self._clock.now()
        while starts and starts[0] <= now - WINDOW_S:
            starts.popleft()
        if len(starts) >= self._limits[client_key]:
            return starts[0] + WINDOW_S - now
        starts.append(now)
        return None
