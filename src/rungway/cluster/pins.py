"""Session pins shared by every process of a cluster through Redis.

A pinned session costs the request path one lookup in this process's own pins. Redis is
asked only for a session this process has not seen, once (a `GET` on the request path's
pipelined channel), and the answer is kept locally. What this process pins reaches Redis
off the request path: a writer task sends each new pin, each move and, once a quarter of
the TTL has passed, a live pin's renewal, as `<prefix>:pin:<session key>` with the TTL
(`SET ... PX`), through one script that:

- keeps a pin another process made first: two replicas that both served a session's first
  turn before either had written settle on the first pin written, and the later one adopts
  it (no move);
- publishes a move on `<prefix>:pin-feed`, so every process that knows the session follows
  it at once instead of sending its next turn back to the old account.

While Redis does not answer, each process keeps pinning on its own (said once in the log),
and its writes wait, up to a bound, for the rejoin. A rejoin forgets the local pins, which
a move published meanwhile may have made stale: each session is read again on its next
turn, and the writes kept through the outage are sent first, each adopting a pin another
process made meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

import redis.asyncio as redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from rungway.cluster.channel import ChannelScript
from rungway.cluster.link import UNREACHABLE, RedisLink

log = logging.getLogger("rungway.cluster")

PIN_SCRIPT = """
-- KEYS[1] the session's pin; ARGV: connection, TTL in ms, '1' for a first pin,
-- the feed channel, the key as published.
local current = redis.call('GET', KEYS[1])
if ARGV[3] == '1' and current and current ~= ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return current
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if current and current ~= ARGV[1] then
  redis.call('PUBLISH', ARGV[4], ARGV[5] .. '\\n' .. ARGV[1])
end
return false
"""

MAX_PENDING = 10_000
"""The most pin writes kept while Redis does not answer; the oldest go first."""


class LocalPins(Protocol):
    """What the shared store needs of this process's own pins (`engine.pins.MemoryPins`)."""

    ttl_s: float

    @property
    def moves(self) -> int: ...

    def pinned(self, key: str, now: float) -> str | None: ...

    def pin(self, key: str, connection_id: str, now: float) -> str | None: ...

    def adopt(self, key: str, connection_id: str, now: float, *, shared: bool) -> None: ...

    def follow(self, key: str, connection_id: str) -> None: ...

    def stale_share(self, key: str, now: float) -> bool: ...

    def clear(self) -> None: ...

    def pinned_counts(self, now: float | None = None) -> dict[str, int]: ...


class RedisPins:
    """Session pins in Redis, with this process's own in front (`engine.pins.PinStore`)."""

    shared = True

    def __init__(self, link: RedisLink, local: LocalPins) -> None:
        self._link = link
        self._local = local
        self._ttl_ms = max(1, round(local.ttl_s * 1000))
        self._script = ChannelScript(link.channel, PIN_SCRIPT)
        self._feed = link.key("pin-feed")
        self._feed_client = _feed_client(link.client)
        self._pending: dict[str, tuple[str, bool, float]] = {}
        """Per session key: the connection to write, whether it is a first pin, and when."""
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._pubsub: PubSub | None = None
        self._joins = 0
        self._said_down = False
        link.on_join(self._joined)

    @property
    def moves(self) -> int:
        """How many times this process moved a session."""
        return self._local.moves

    def pinned(self, key: str, now: float) -> str | None:
        """The pin this process knows: one lookup, no Redis."""
        return self._local.pinned(key, now)

    async def recall(self, key: str, now: float) -> str | None:
        """The session's pin in Redis (another process's), kept locally once read; None
        when it has none, or while Redis does not answer."""
        if not self._link.up:
            self._down("read")
            return None
        try:
            # The channel gives up after its timeout, and the link then reads as down.
            value = await self._link.channel.call("GET", self._link.key("pin", key))
        except UNREACHABLE as error:
            self._link.lost(error)
            self._down("read")
            return None
        if not isinstance(value, bytes):
            return None
        connection_id = value.decode("utf-8", "replace")
        self._local.adopt(key, connection_id, now, shared=False)
        return connection_id

    def pin(self, key: str, connection_id: str, now: float) -> str | None:
        """Pin here at once; write the pin to Redis soon when it is new, moved or due.
        The connection it was pinned to before, if any."""
        previous = self._local.pin(key, connection_id, now)
        stale = self._local.stale_share(key, now)
        if previous == connection_id and not stale:
            return previous
        pending = self._pending
        pending.pop(key, None)
        pending[key] = (connection_id, previous is None, now)
        if len(pending) > MAX_PENDING:
            del pending[next(iter(pending))]
        self._wake.set()
        return previous

    def pinned_counts(self, now: float | None = None) -> dict[str, int]:
        """How many of the sessions this process knows each connection holds."""
        return self._local.pinned_counts(now)

    async def flush(self) -> None:
        """Write every pending pin now, if Redis answers (for shutdown and tests)."""
        if self._pending and self._link.up:
            await self._write()

    async def stop(self) -> None:
        """Write what is pending and end the tasks; call it before the link closes."""
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None
        with contextlib.suppress(*UNREACHABLE):
            await self.flush()
        await self._unlisten()
        with contextlib.suppress(*UNREACHABLE):
            await self._feed_client.aclose()

    def _down(self, what: str) -> None:
        if not self._said_down:
            self._said_down = True
            log.warning(
                "pins: redis at %s does not answer; session pins %s this process's own "
                "until it does",
                self._link.address,
                "are" if what == "read" else "stay",
            )

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._pending or not self._link.up:
                # While Redis is away the writes wait in `_pending` for the rejoin.
                if self._pending:
                    self._down("write")
                continue
            try:
                await self._write()
            except UNREACHABLE as error:
                self._link.lost(error)
                self._down("write")
            except Exception:
                # The writer must outlive any one write; what failed is written next time.
                log.exception("pins: could not write the session pins")

    async def _write(self) -> None:
        batch, self._pending = self._pending, {}
        keys = list(batch)
        calls = [
            self._script(
                [self._link.key("pin", key)],
                [connection_id, self._ttl_ms, "1" if first else "0", self._feed, key],
            )
            for key, (connection_id, first, _) in batch.items()
        ]
        # The channel pipelines the calls: one write, one read for the whole batch.
        results = await asyncio.gather(*calls, return_exceptions=True)
        failed: BaseException | None = None
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, BaseException):
                failed = failed or result
                self._pending.setdefault(key, batch[key])
            elif isinstance(result, bytes):
                # Another process pinned the session first: keep to its pin.
                _, _, at = batch[key]
                self._local.adopt(key, result.decode("utf-8", "replace"), at, shared=True)
        if failed is not None:
            raise failed
        self._said_down = False

    async def _joined(self) -> None:
        self._joins += 1
        if self._joins > 1:
            # A move published while this process was not listening went unheard.
            self._local.clear()
        await self._listen()
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_forever())
        # What was pinned while Redis was away, written before the link reads as up.
        if self._pending:
            await self._write()

    async def _listen(self) -> None:
        await self._unlisten()
        pubsub = self._feed_client.pubsub()
        try:
            await pubsub.subscribe(self._feed)
        except BaseException:
            with contextlib.suppress(*UNREACHABLE):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            raise
        self._pubsub = pubsub
        self._listener = asyncio.get_running_loop().create_task(self._receive(pubsub))

    async def _unlisten(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self._pubsub is not None:
            with contextlib.suppress(*UNREACHABLE):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            self._pubsub = None

    async def _receive(self, pubsub: PubSub) -> None:
        try:
            async for message in pubsub.listen():
                if message["type"] == "message":
                    self._heard(message["data"])
        except UNREACHABLE as error:
            # A dropped feed may have missed moves: the rejoin forgets the local pins.
            self._link.lost(error)

    def _heard(self, data: bytes) -> None:
        # Every move is followed, this process's own too: the feed's order is the order
        # Redis applied them, so the last one heard is the pin Redis holds.
        key, _, connection_id = data.partition(b"\n")
        self._local.follow(key.decode("utf-8", "replace"), connection_id.decode("utf-8", "replace"))


def _feed_client(client: redis.Redis) -> redis.Redis:
    """A client of its own for the feed that never reconnects behind the store's back: a
    reconnect would miss what was published meanwhile, so a drop goes to the link."""
    pool = client.connection_pool
    kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0)}
    return redis.Redis(
        connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    )
