"""The quota board's live state shared through Redis, with a change feed.

Every process keeps the whole board in memory and plans from it alone, so the request path
never waits for Redis. What changes reaches the others this way:

- `save` stamps the change with the instant and keeps it as the connection's latest;
  nothing more.
- A writer task gathers the changes of a moment (`_GATHER_S`) and writes each changed
  connection with one
  script (`cluster.merge.MERGE_SCRIPT`), all in one pipeline: the script merges the
  record part by part into `<prefix>:state` (a hash of connection id to record) and
  publishes the merged record on `<prefix>:state-feed` with this process's origin.
- A listener takes the other processes' records from the feed, merges them into what this
  process knows, and hands the result to the board with `QuotaBoard.adopt`, which does not
  save it back. A change made on one replica is used by the others on their next request
  after it arrives, a millisecond or so later.
- Each time the link (re)joins Redis the store subscribes again, writes every record it
  knows (so what changed while Redis was away, or a Redis that came back empty, is
  merged), and loads the whole hash (what the others wrote meanwhile).

While Redis is away the board keeps serving from its own readings, and changes wait in
memory for the rejoin; the merge rule (`cluster.merge`) decides, part by part, whose change
stands. A process that exits while Redis is away loses what it had not written.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Callable, Collection, Mapping

import redis.asyncio as redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError

from rungway.clock import Clock
from rungway.cluster.link import UNREACHABLE, RedisLink
from rungway.cluster.merge import (
    DEFAULT_PARTS,
    MERGE_SCRIPT,
    Part,
    Record,
    decode_record,
    encode_record,
    joined,
    merged,
    split,
)
from rungway.quota.board import QuotaBoard
from rungway.quota.encoding import UNREADABLE
from rungway.quota.store import SavedConnection
from rungway.routing.snapshot import WindowStatus

log = logging.getLogger("rungway.cluster")

_GATHER_S = 0.05
"""How long a new reading waits for more before the writer sends it. A plan's readings
change with every answer it gives, and a write per answer would cost each request a Redis
round trip of CPU; one write a moment carries them all. A change that moves the ladder (a
window running out or coming back, a cooldown, a breaker, an overage flag, a disable) is
written at once, so the others stop planning a spent or disabled connection on their next
request."""
_UNSTAMPED = ""
"""The origin of a part nobody has changed: every part starts at its default."""


class RedisStateStore:
    """The quota board's state in Redis, written by a task and followed through a feed."""

    def __init__(
        self,
        link: RedisLink,
        clock: Clock,
        *,
        origin: str | None = None,
        stamp: Callable[[], float] = time.time,
        gather_s: float = _GATHER_S,
    ) -> None:
        self.origin = origin or secrets.token_hex(6)
        """This process's name on the feed, so it can tell its own records."""
        self._link = link
        self._clock = clock
        self._stamp = stamp
        self._gather_s = gather_s
        self._hash = link.key("state")
        self._channel = link.key("state-feed")
        self._sha = hashlib.sha1(MERGE_SCRIPT.encode()).hexdigest()
        self._feed_client = _feed_client(link.client)
        self._board: QuotaBoard | None = None
        self._ids: frozenset[str] | None = None
        self._pending: dict[str, tuple[SavedConnection | None, float]] = {}
        self._routing: dict[str, tuple[object, ...]] = {}
        """Per connection, what the ladder reads of its last saved state (`_routing_of`)."""
        self._urgent = asyncio.Event()
        self._known: dict[str, dict[str, Part]] = {}
        self._dirty: set[str] = set()
        self._last_at = 0.0
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._pubsub: PubSub | None = None
        link.on_join(self._joined)

    def attach(self, board: QuotaBoard, connection_ids: Collection[str]) -> None:
        """Hand the other processes' changes of `connection_ids` to `board`."""
        self._board = board
        self._ids = frozenset(connection_ids)

    def load(self) -> Mapping[str, SavedConnection]:
        """Nothing yet: the store loads the shared state each time it joins Redis."""
        return {}

    def save(self, connection_id: str, saved: SavedConnection | None) -> None:
        """Stamp the change and keep it for the writer; never waits."""
        # Strictly increasing, so two changes within one clock tick keep their order.
        at = max(self._stamp(), self._last_at + 1e-6)
        self._last_at = at
        # Only the latest state per connection is kept: the writer sends where each
        # connection stands, not how it got there.
        self._pending[connection_id] = (saved, at)
        routing = _routing_of(saved)
        if self._routing.get(connection_id) != routing:
            self._routing[connection_id] = routing
            self._urgent.set()
        self._wake.set()

    def close(self) -> None:
        """Nothing to do here: `stop` writes what is pending and ends the tasks."""

    async def stop(self) -> None:
        """Write what is pending (when Redis answers) and end the tasks; call it before the
        link closes."""
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        with contextlib.suppress(*UNREACHABLE):
            await self.flush()
        await self._unlisten()
        with contextlib.suppress(*UNREACHABLE):
            await self._feed_client.aclose()

    async def flush(self) -> None:
        """Write every queued change now, if Redis answers."""
        self._absorb()
        if self._dirty and self._link.up:
            await self._write(list(self._dirty))

    def known(self, connection_id: str) -> Record:
        """What this process knows of a connection's shared record (for tests and checks)."""
        return dict(self._known.get(connection_id, {}))

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._gather_s):
                        await self._urgent.wait()
            self._urgent.clear()
            self._absorb()
            if not self._dirty or not self._link.up:
                # While Redis is away the changes wait in `_dirty` for the rejoin.
                continue
            try:
                await self._write(list(self._dirty))
            except UNREACHABLE as error:
                self._link.lost(error)
            except Exception:
                # The writer must outlive any one write; the changes stay queued.
                log.exception("state: could not write the shared state")

    async def _write(self, connection_ids: list[str]) -> None:
        self._dirty.difference_update(connection_ids)
        try:
            async with self._link.client.pipeline(transaction=False) as pipe:
                for connection_id in connection_ids:
                    record = encode_record(self._known[connection_id])
                    # EVALSHA, not the script object: in a pipeline that would check the
                    # script exists first, a second round trip on every write.
                    pipe.evalsha(
                        self._sha, 1, self._hash, connection_id, record, self._channel, self.origin
                    )
                results = await pipe.execute(raise_on_error=False)
        except BaseException:
            self._dirty.update(connection_ids)
            raise
        for connection_id, result in zip(connection_ids, results, strict=True):
            if isinstance(result, NoScriptError):
                # Redis lost its scripts (a restart this link did not notice, or a flush).
                self._sha = await self._link.client.script_load(MERGE_SCRIPT)
                self._dirty.add(connection_id)
                self._wake.set()
            elif isinstance(result, Exception):
                # Redis refused the write (out of memory, a record it cannot decode): say
                # so, and try again with the connection's next change or the next join.
                log.warning("state: redis refused the state of %r: %s", connection_id, result)
                self._dirty.add(connection_id)
            else:
                # The merged record may hold parts another process wrote while this one
                # was not listening: take them up as if they came through the feed.
                self._take_up(connection_id, result)

    def _absorb(self) -> None:
        """Turn queued board changes into stamped parts of the known records."""
        pending, self._pending = self._pending, {}
        for connection_id, (saved, at) in pending.items():
            record = self._known.setdefault(connection_id, {})
            for name, data in split(saved).items():
                before = record.get(name) or Part(DEFAULT_PARTS[name], 0.0, _UNSTAMPED)
                # A part equal to what was known is no change: stamping it would let a
                # board that never saw a disable undo it by saving its own default.
                change = Part(data, at, self.origin)
                if data != before.data and change.newer_than(before):
                    record[name] = change
                    self._dirty.add(connection_id)

    def _take_up(self, connection_id: str, blob: bytes | str) -> None:
        try:
            theirs = decode_record(blob)
        except UNREADABLE as error:
            log.warning("state: the shared record of %r is unreadable (%s)", connection_id, error)
            return
        # Changes this board made but the writer has not stamped yet come first: they
        # may be newer than the record that just arrived.
        self._absorb()
        mine = self._known.get(connection_id, {})
        result = merged(mine, theirs)
        if result == mine:
            return
        self._known[connection_id] = result
        board = self._board
        if board is None or (self._ids is not None and connection_id not in self._ids):
            return
        try:
            saved = joined(result)
        except UNREADABLE as error:
            log.warning("state: the shared record of %r is unreadable (%s)", connection_id, error)
            return
        board.adopt(connection_id, saved, self._clock.now())

    async def _joined(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write_forever())
        # Subscribe before loading, so nothing written after the load goes unseen.
        await self._listen()
        self._sha = await self._link.client.script_load(MERGE_SCRIPT)
        self._absorb()
        if self._known:
            await self._write(list(self._known))
        everything = await self._link.client.hgetall(self._hash)
        for key, blob in everything.items():
            self._take_up(key.decode() if isinstance(key, bytes) else str(key), blob)

    async def _listen(self) -> None:
        await self._unlisten()
        pubsub = self._feed_client.pubsub()
        try:
            await pubsub.subscribe(self._channel)
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
            # A dropped feed may have missed changes: the rejoin loads them all again.
            self._link.lost(error)

    def _heard(self, data: bytes) -> None:
        origin, _, rest = data.partition(b"\n")
        connection_id, _, blob = rest.partition(b"\n")
        if origin.decode() != self.origin:
            self._take_up(connection_id.decode(), blob)


def _routing_of(saved: SavedConnection | None) -> tuple[object, ...]:
    """What the ladder decides on in a saved state, readings' exact percentages aside."""
    if saved is None:
        return ()
    state = saved.state
    spent = tuple(
        (window.name, window.model)
        for window in state.windows
        if window.was_exhausted or window.status is WindowStatus.REJECTED
    )
    return (
        spent,
        state.cooldown_until,
        state.disabled,
        state.overage_permitted,
        state.overage_in_use,
        saved.breaker_opened_at,
    )


def _feed_client(client: redis.Redis) -> redis.Redis:
    """A client of its own for the feed, that never reconnects behind the store's back:
    a reconnect would drop what was published meanwhile, so a drop must reach the link,
    whose rejoin loads the whole state again."""
    pool = client.connection_pool
    kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0)}
    return redis.Redis(
        connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    )
