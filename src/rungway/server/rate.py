"""Requests per minute per client key (`client_keys[].requests_per_minute`).

Each limited key keeps the start times of its requests in the last 60 seconds, so the
limit holds over any 60-second span, not per calendar minute, and a refused client is told
exactly when a slot frees.

A lone gateway keeps that log in this process. In a cluster a `SharedWindows` keeps it
for every process (one round trip per limited request); while it does not answer, each
process falls back to its own log, so the cluster admits up to its number of processes
times the limit until the shared store is back (the store shows degraded meanwhile).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Protocol

from rungway.clock import Clock

WINDOW_S = 60.0


class SharedWindows(Protocol):
    """Rate windows kept outside this process, shared by every process of a cluster."""

    @property
    def up(self) -> bool:
        """False while the shared store is known not to answer (then it is not asked)."""
        ...

    async def admit(self, client_key: str, limit: int, now: float, window_s: float) -> float | None:
        """Count one request of `client_key` at `now`; or, when `limit` requests started in
        the last `window_s` seconds, count nothing and return the seconds until a slot
        frees. Raises `ConnectionError` when the store does not answer."""
        ...


class RequestRate:
    """The requests-per-minute limits of the client keys that have one."""

    def __init__(
        self, limits: Mapping[str, int], clock: Clock, shared: SharedWindows | None = None
    ) -> None:
        self._limits = dict(limits)
        self._starts: dict[str, deque[float]] = {name: deque() for name in limits}
        self._clock = clock
        self._shared = shared

    def limit(self, client_key: str) -> int | None:
        """The key's limit, or None when it has none."""
        return self._limits.get(client_key)

    async def admit(self, client_key: str | None) -> float | None:
        """Count one request of `client_key`; or, when it is at its limit, count nothing
        and return the seconds until it may start another."""
        if client_key is None or client_key not in self._limits:
            return None
        limit = self._limits[client_key]
        now = self._clock.now()
        if self._shared is not None and self._shared.up:
            try:
                wait = await self._shared.admit(client_key, limit, now, WINDOW_S)
            except ConnectionError:
                pass  # this process's own log decides until the shared one answers
            else:
                if wait is None:
                    # Kept here too, so a fallback starts from this process's recent share.
                    self._expire(client_key, now).append(now)
                return wait
        starts = self._expire(client_key, now)
        if len(starts) >= limit:
            return starts[0] + WINDOW_S - now
        starts.append(now)
        return None

    def _expire(self, client_key: str, now: float) -> deque[float]:
        starts = self._starts[client_key]
        while starts and starts[0] <= now - WINDOW_S:
            starts.popleft()
        return starts
