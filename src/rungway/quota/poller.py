"""Polling plan usage endpoints: in the background, after resets, and inline on demand.

`auto/subscription` uses a plan only on a fresh verified reading. On a cold start there is
none, so the planner asks `verify()` for the plan connections first: each one missing a
fresh reading is polled once (single-flight: concurrent requests share the one call),
within a short deadline. In the background, every connection is polled at an interval and
once right after each known window reset. Each endpoint's own rate limit is honoured: a
429 from it pauses polling of that connection for its `Retry-After`.

A failed poll adds nothing, so the last reading simply ages into staleness; it can never
leave a stale "available" reading behind.

Across the processes of a cluster a `PollClaim` decides who polls: one process claims a
connection's poll, the others read its result when the shared board brings it. An inline
`verify` that loses the claim waits, within its deadline, for that reading instead of
polling too. A lone process claims every poll (`LocalPollClaim`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from rungway.clock import Clock
from rungway.quota.board import QuotaBoard
from rungway.quota.usage import PolledReading
from rungway.routing.settings import LadderSettings

log = logging.getLogger("rungway.quota")

Fetch = Callable[..., Awaitable[tuple[int, Mapping[str, str], bytes]]]
"""Read a usage endpoint within a deadline, `fetch(url, headers, deadline_s)`: GET, or POST
with `body=` for an endpoint read by POST, and `proxy=` for a connection's own proxy;
returns (status, headers, body)."""
ReadUsage = Callable[[bytes, float], PolledReading]
_FEED_CHECK_S = 0.01
"""How often a verify that lost the claim looks for the winner's reading."""


class PollClaim(Protocol):
    """Which process of a cluster polls a connection's usage endpoint now."""

    async def claim(self, connection_id: str, now: float, since: float, hold_s: float) -> bool:
        """True when this process should poll: nobody claimed a poll of the connection
        after `since`. A granted claim is remembered for `hold_s` seconds."""
        ...


class LocalPollClaim:
    """The claim of a lone process: every poll is its own."""

    async def claim(self, connection_id: str, now: float, since: float, hold_s: float) -> bool:
        """Always True."""
        return True


@dataclass(frozen=True, slots=True)
class PollTarget:
    """One connection's usage endpoint and how to read it."""

    connection_id: str
    url: str
    headers: Mapping[str, str]
    read: ReadUsage
    body: Callable[[], bytes | None] | None = None
    """For an endpoint read by POST (Code Assist's `retrieveUserQuota`): the body to send
    now, or None while it cannot be written yet (the poll waits for its next turn)."""
    proxy: str | None = None
    """The connection's `proxy:` setting, passed to `fetch` as `proxy=` when set."""


class UsagePoller:
    """Keeps plan readings fresh by polling their usage endpoints."""

    def __init__(
        self,
        board: QuotaBoard,
        targets: Iterable[PollTarget],
        fetch: Fetch,
        clock: Clock,
        settings: LadderSettings,
        *,
        interval_s: float = 300.0,
        deadline_s: float = 2.0,
        claim: PollClaim | None = None,
    ) -> None:
        self._board = board
        self._targets = {target.connection_id: target for target in targets}
        self._fetch = fetch
        self._clock = clock
        self._max_age = settings.max_state_age_s
        self._interval = interval_s
        self._deadline = deadline_s
        self._claim = claim or LocalPollClaim()
        # A claim outlives the longest look-back a poll makes: an interval, or a deadline.
        self._hold = max(interval_s, deadline_s)
        self._inflight: dict[str, asyncio.Task[bool]] = {}
        self._last: dict[str, float] = {}
        self._paused_until: dict[str, float] = {}

    def polls(self, connection_id: str) -> bool:
        """True when the connection has a usage endpoint this poller reads."""
        return connection_id in self._targets

    def needs_reading(self, connection_id: str, now: float) -> bool:
        """True when no fresh account-wide reading of the connection exists, or when a
        window it read has reset since: the first request after a reset reads the new
        window inline instead of being planned on the old one."""
        state = self._board.connection_states(now).get(connection_id)
        # A poll since the reset that did not replace the window (the endpoint does not
        # report it) has read all there is: not a poll per request until it ages.
        read_at = self._last.get(connection_id, 0.0)
        fresh_one = False
        for window in state.windows if state is not None else ():
            if (
                window.resets_at is not None
                and max(window.checked_at, read_at) < window.resets_at <= now
            ):
                return True
            if window.model is None and now - window.checked_at <= self._max_age:
                fresh_one = True
        return not fresh_one

    async def verify(self, connection_ids: Iterable[str]) -> None:
        """Poll, within the deadline, each of `connection_ids` that lacks a fresh reading."""
        now = self._clock.now()
        due = [
            cid for cid in connection_ids if cid in self._targets and self.needs_reading(cid, now)
        ]
        if not due:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._deadline):
                await asyncio.gather(*(self.poll(cid) for cid in due))

    async def poll(self, connection_id: str) -> None:
        """Poll one connection now, or join the poll already under way; when another
        process is polling it, wait (within the deadline) for its reading instead."""
        # A poll claimed elsewhere within the deadline may still be under way; one
        # claimed before that has delivered its reading, or failed.
        since = self._clock.now() - self._deadline
        if not await self._single(connection_id, since):
            await self._reading_of(connection_id)

    async def _single(self, connection_id: str, since: float) -> bool:
        """Poll unless a poll was claimed after `since`; True if this one polled."""
        task = self._inflight.get(connection_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._poll_once(connection_id, since))
            self._inflight[connection_id] = task
            task.add_done_callback(lambda _: self._inflight.pop(connection_id, None))
        return await asyncio.shield(task)

    async def _reading_of(self, connection_id: str) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._deadline):
                # The reading comes through the shared board, which has nothing to wait on;
                # a look every few milliseconds, bounded by the deadline, is cheap.
                while self.needs_reading(connection_id, self._clock.now()):  # noqa: ASYNC110
                    await asyncio.sleep(_FEED_CHECK_S)

    async def run(self, tick_s: float = 1.0) -> None:
        """Poll in the background until cancelled: at the interval and after each reset."""
        while True:
            now = self._clock.now()
            for connection_id in list(self._targets):
                since = self._due_since(connection_id, now)
                if since is not None:
                    with contextlib.suppress(Exception):
                        await self._single(connection_id, since)
            await asyncio.sleep(tick_s)

    def _due_since(self, connection_id: str, now: float) -> float | None:
        """None when no poll is due; else the instant after which a poll by any process
        makes this one needless."""
        last = self._last.get(connection_id)
        if last is None or now - last >= self._interval:
            return now - self._interval
        # A window reset since the last poll: read the new window at once.
        state = self._board.connection_states(now).get(connection_id)
        resets = [
            window.resets_at
            for window in (state.windows if state is not None else ())
            if window.resets_at is not None and last < window.resets_at <= now
        ]
        return max(resets) if resets else None

    async def _poll_once(self, connection_id: str, since: float) -> bool:
        target = self._targets[connection_id]
        now = self._clock.now()
        if self._paused_until.get(connection_id, 0.0) > now:
            return True
        self._last[connection_id] = now
        if not await self._claim.claim(connection_id, now, since, self._hold):
            return False
        payload = target.body() if target.body is not None else None
        if target.body is not None and payload is None:
            return True
        # Only a connection with a proxy of its own names it to `fetch`.
        extra = {} if target.proxy is None else {"proxy": target.proxy}
        try:
            status, headers, body = (
                await self._fetch(target.url, target.headers, self._deadline, **extra)
                if payload is None
                else await self._fetch(
                    target.url, target.headers, self._deadline, body=payload, **extra
                )
            )
        except Exception as error:  # an unreachable endpoint must not break the request path
            log.warning("usage poll of %s failed: %s", connection_id, error)
            return True
        received = self._clock.now()
        if status == 429:
            wait = headers.get("retry-after")
            pause = float(wait) if wait and wait.replace(".", "", 1).isdigit() else 300.0
            self._paused_until[connection_id] = received + pause
            log.info("usage endpoint of %s asks for a %.0fs pause", connection_id, pause)
            return True
        if status >= 300:
            log.warning("usage poll of %s answered HTTP %d", connection_id, status)
            return True
        reading = target.read(body, received)
        if reading.overage_permitted is not None:
            self._board.observe_overage(connection_id, reading.overage_permitted)
        if reading.windows:
            self._board.observe(connection_id, reading.windows, received)
        return True
