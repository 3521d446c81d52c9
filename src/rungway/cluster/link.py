"""The one Redis every process of a cluster shares, and whether it answers right now.

A `RedisLink` owns the client (one connection pool per process), names every key under
the configured prefix, and keeps the store's health: `up` is what the request path reads,
so a lost Redis costs a request one failed command, not a wait per request. While Redis
is unreachable a watcher pings it at a short interval; when it answers again each
`on_join` callback runs (reload the shared state, replay queued settles) before `up` turns
true, so nothing reads the store half-joined. Redis unreachable at start is the same
case: the gateway starts, shows the store degraded, and joins when it can.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as redis
from redis.asyncio.connection import SSLConnection, UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from rungway.cluster.channel import RespChannel
from rungway.cluster.health import StoreHealth

log = logging.getLogger("rungway.cluster")

Joined = Callable[[], Awaitable[None]]
"""Run each time the link (re)joins Redis, before it is marked up."""

UNREACHABLE: tuple[type[BaseException], ...] = (RedisError, OSError, asyncio.TimeoutError)
"""What a command raises when Redis does not answer (refused, reset, timed out)."""


class RedisLink:
    """The cluster's Redis: its client, its key prefix, and whether it answers."""

    def __init__(
        self,
        url: str,
        prefix: str,
        *,
        timeout_s: float = 0.5,
        retry_s: float = 1.0,
    ) -> None:
        self.prefix = prefix
        self.client: redis.Redis = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            # A lost connection is the watcher's to find; a command fails at once rather
            # than retrying (redis-py otherwise retries each command with backoff).
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self.channel = channel_of(self.client.connection_pool, timeout_s)
        """The request path's pipelined connection, for its one script call."""
        self.address = self.channel.address
        self._retry_s = retry_s
        self._joined: list[Joined] = []
        self._up = False
        self._down_since: float | None = time.time()
        self._error = "not yet reached"
        self._watcher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def key(self, *parts: str) -> str:
        """The key named by `parts` under this cluster's prefix."""
        return ":".join((self.prefix, *parts))

    @property
    def up(self) -> bool:
        """True while Redis answers and every `on_join` callback has run since it last
        came back."""
        return self._up

    def on_join(self, callback: Joined) -> None:
        """Run `callback` each time the link joins (or rejoins) Redis."""
        self._joined.append(callback)

    def health(self) -> StoreHealth:
        """The store's health as the operator should see it."""
        if self._up:
            return StoreHealth("redis", True, f"redis at {self.address}")
        since = self._down_since or time.time()
        ago = max(0, round(time.time() - since))
        return StoreHealth(
            "redis",
            False,
            f"redis at {self.address} unreachable for {ago}s ({self._error}); "
            "budgeted paid rungs refuse until it answers",
        )

    def lost(self, error: BaseException) -> None:
        """A command failed because Redis did not answer: mark the link down and let the
        watcher find when it answers again."""
        if self._up:
            log.warning("redis at %s lost: %s", self.address, _reason(error))
            self._down_since = time.time()
        self._up = False
        self._error = _reason(error)
        self._wake.set()

    async def start(self) -> None:
        """Try to join now, then keep watching; never raises when Redis is unreachable."""
        await self._try_join()
        if not self._up:
            log.warning(
                "redis at %s unreachable at start (%s); the store is degraded until it answers",
                self.address,
                self._error,
            )
        self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def close(self) -> None:
        """Stop watching and close the client's connections."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        self.channel.close()
        with contextlib.suppress(*UNREACHABLE):
            await self.client.aclose()

    async def _watch(self) -> None:
        while True:
            if self._up:
                # Up: sleep until a command reports the link lost (or check now and then).
                # Not `wait_for`: on 3.11 it can swallow the cancel `close()` sends.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(5.0):
                        await self._wake.wait()
                self._wake.clear()
                if self._up:
                    await self._check()
                continue
            await asyncio.sleep(self._retry_s)
            await self._try_join()

    async def _check(self) -> None:
        try:
            await self.client.ping()
        except UNREACHABLE as error:
            self.lost(error)

    async def _try_join(self) -> None:
        try:
            await self.client.ping()
            for callback in self._joined:
                await callback()
        except UNREACHABLE as error:
            self._up = False
            self._error = _reason(error)
            return
        if self._down_since is not None and self._error != "not yet reached":
            log.warning("redis at %s answers again; the store is shared once more", self.address)
        self._up = True
        self._down_since = None
        self._error = ""


def channel_of(pool: redis.ConnectionPool, timeout_s: float) -> RespChannel:
    """A pipelined channel to the Redis `pool` connects to, read from redis-py's own
    parse of the URL: plain TCP, TLS (`rediss://`, its `ssl_*` parameters) or a unix socket
    (`unix://`)."""
    kwargs = pool.connection_kwargs
    kind = pool.connection_class
    ssl = None
    if issubclass(kind, SSLConnection):
        # The context redis-py would build from the same parameters (CA, verify mode,
        # client certificate, hostname check); making the object opens no socket.
        ssl = kind(**kwargs).ssl_context.get()
    path = str(kwargs["path"]) if issubclass(kind, UnixDomainSocketConnection) else None
    return RespChannel(
        str(kwargs.get("host", "localhost")),
        int(kwargs.get("port", 6379)),
        path=path,
        ssl=ssl,
        db=int(kwargs.get("db", 0)),
        username=kwargs.get("username"),
        password=kwargs.get("password"),
        timeout_s=timeout_s,
    )


def _reason(error: BaseException) -> str:
    # redis-py's messages name host and port, never the password; keep them one line.
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:200]
