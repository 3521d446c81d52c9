"""The changes a budget sends to Redis off the request path, and the seeding of spend.

Settles, releases and costs without a hold are queued on the event loop and sent by one
background task, many to a pipeline (one round trip). Each is idempotent in Redis (a
hold's token, a request's marker, a crash row's marker), so one whose answer was lost can
be sent again. While Redis does not answer they stay queued, and written down on disk
(`budget_changes.PendingChanges`) so that a gateway stopped meanwhile sends them at its
next start; the link's join replays them, so spend and holds agree again once it is back.

A period's spend hash is seeded from the ledger, only when it is missing (first use, a new
period, a Redis that restarted empty) and only once however many processes try: `SEED`
sets it when it does not exist. The ledger already holds the row of every change this
process queued before reading it, so when this process's seed is the one that lands,
those changes send no cost to that hash: the seed counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

from rungway.budget.local import Grouping, SpentSince, UnrecordedCost
from rungway.clock import Clock
from rungway.cluster.budget_changes import Change, Kind, PendingChanges, Target
from rungway.cluster.budget_scripts import APPLY, SEED, nano
from rungway.cluster.link import UNREACHABLE, RedisLink

log = logging.getLogger("rungway.cluster")

Unrecorded = Callable[[float], Iterable[UnrecordedCost]]
"""The rows a crash left as `unrecorded` since an instant, read from the ledger."""

_BATCH: Final = 256
_MAX_QUEUED: Final = 100_000
"""Beyond this many changes waiting for Redis the oldest are dropped from memory (and
logged): memory must stay bounded through a long outage. The file of pending changes
still holds them, for the next start."""
_MARKER_TTL_S: Final = 3_600
"""How long a cost without a hold is remembered as counted. A change is only sent twice
when the answer to its batch was lost, and is sent again when the link rejoins; an hour
covers that, and keeps one key per unbudgeted paid request from piling up for a day."""
_KEEP_PAST_PERIOD_S: Final = 7 * 86_400
"""How long a period's spend hash outlives its period, for settles that arrive late."""


class LedgerUnreadable(Exception):
    """The ledger that seeds a period's spend could not be read."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the ledger could not be read to seed spend: {reason}")
        self.reason = reason
        """Why, in one line, as the operator and a refused client should read it."""


GATHER_S = 0.02
"""How long a queued change waits for others before they are sent together. A settle sent
per request would cost each request a round trip's CPU; meanwhile its hold, at least its
cost, stays counted, so a later send never lets a budget be passed."""


class SpendWriter:
    """Queues budget changes and sends them to Redis in pipelines; seeds spend hashes."""

    def __init__(
        self,
        link: RedisLink,
        spent_since: SpentSince,
        unrecorded: Unrecorded | None,
        clock: Clock,
        *,
        done_ttl_s: int = 86_400,
        pending: PendingChanges | None = None,
        gather_s: float = GATHER_S,
    ) -> None:
        self._link = link
        self._pending = pending
        self._saved = True
        """Every change queued is on disk (or there is no file to keep them in)."""
        self._done_ttl_s = done_ttl_s
        self._gather_s = gather_s
        self._spent_since = spent_since
        self._unrecorded = unrecorded
        self._clock = clock
        self._apply = link.client.register_script(APPLY)
        self._seed = link.client.register_script(SEED)
        self._queue: deque[Change] = deque()
        self._seq = itertools.count()
        self._next_seq = 0
        self._covered: dict[str, int] = {}
        """Per spend hash this process seeded: changes numbered below it are in the seed."""
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stopping = False
        self._unreadable = False
        """The last seed failed to read the ledger (said once, until one succeeds)."""
        self.on_missing: Callable[[], None] | None = None
        """Called when a spend hash was found missing and seeded (by this process or
        another): Redis lost what it held, the open holds of this process among them."""

    @property
    def pending(self) -> int:
        """Changes not yet acknowledged by Redis."""
        return len(self._queue)

    def queue(
        self,
        kind: Kind,
        marker: str,
        member: str,
        targets: tuple[Target, ...],
        cost: int,
        *,
        at: float | None = None,
        seed: str = "",
    ) -> None:
        """Queue one change for the background sender (`at`: a rehold's expiry; `seed`:
        the seed its hold was taken in)."""
        when = self._clock.now() if at is None else at
        self._append(Change(0, kind, marker, member, targets, cost, when, seed))

    def load(self) -> int:
        """Queue what the last run left waiting on disk; how many changes."""
        if self._pending is None:
            return 0
        left = self._pending.load()
        for change in left:
            self._append(change)
        return len(left)

    def save(self) -> None:
        """Write down what waits for Redis and is not on disk yet."""
        if not self._saved:
            self._write(self._queue)
        self._saved = True

    def close(self) -> None:
        """Write down what still waits, and close the file."""
        self.save()
        if self._pending is not None:
            self._pending.close()

    def _append(self, change: Change) -> None:
        self._next_seq = seq = next(self._seq) + 1
        change.seq = seq - 1
        self._queue.append(change)
        if self._pending is not None and change.row is None:
            if self._link.up:
                self._saved = False  # sent in a moment: no file I/O on the request path
            else:
                # Nothing reaches Redis until it answers: on disk now, so that a stop or a
                # kill meanwhile loses nothing.
                self._write((change,))
        if len(self._queue) > _MAX_QUEUED:
            dropped = self._queue.popleft()
            log.error(
                "budget: %d changes wait for redis at %s; dropped the oldest (%s of $%.6f)",
                _MAX_QUEUED,
                self._link.address,
                dropped.kind,
                dropped.cost / 1e9,
            )
        self._wake.set()

    def _write(self, changes: Iterable[Change]) -> None:
        if self._pending is None:
            return
        try:
            self._pending.save(changes)
        except (sqlite3.Error, OSError) as error:
            # Never the request's failure: the change still waits in memory for Redis.
            log.error(
                "budget: could not write waiting changes to %s: %s", self._pending.path, error
            )

    async def run(self) -> None:
        """Send what is queued whenever there is something and Redis answers, until
        `stop`."""
        # Stopped by a flag, not only by cancelling: redis-py can swallow a cancellation
        # that arrives while a command waits for its answer.
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            if not self._link.up:
                self.save()  # what was queued before Redis went away
                continue  # the join replays the queue
            # Let the settles of a moment gather: one pipeline for many requests.
            await asyncio.sleep(self._gather_s)
            try:
                await self.flush()
            except UNREACHABLE as error:
                self._link.lost(error)
                self.save()
            except Exception as error:
                if not isinstance(error, LedgerUnreadable):  # which the seed said, once
                    log.exception("budget: sending queued changes to redis failed")
                await asyncio.sleep(1.0)
                self._wake.set()

    def stop(self) -> None:
        """Make `run` return once its current batch is answered."""
        self._stopping = True
        self._wake.set()

    async def flush(self) -> None:
        """Send everything queued, seeding the spend hashes it finds missing; raises what
        the link raises when Redis does not answer (the changes then stay queued)."""
        async with self._lock:
            rounds = 0
            while self._queue:
                missing = await self._send(list(itertools.islice(self._queue, _BATCH)))
                if missing:
                    rounds += 1
                    if rounds > 3:
                        # Seeded three times and still missing: something else deletes them.
                        names = sorted(each.spent for each in missing)
                        log.error("budget: spend hashes %s vanish once seeded", names)
                        return
                    await self._seed_locked(missing)

    async def seed(self, targets: Iterable[Target]) -> None:
        """Make sure each target's spend hash exists, seeding it from the ledger if not."""
        async with self._lock:
            await self._seed_locked(list(targets))

    async def _send(self, batch: list[Change]) -> list[Target]:
        calls: list[tuple[list[str], list[str | int]]] = []
        for change in batch:
            costs = [
                0 if change.seq < self._covered.get(target.spent, 0) else change.cost
                for target in change.targets
            ]
            keys = [change.marker]
            for target in change.targets:
                keys += (target.spent, target.holds, target.reserved)
            # A spend sent again after a restart (from disk) may come long after the first.
            short = change.kind == "spend" and change.row is None
            ttl = _MARKER_TTL_S if short else self._done_ttl_s
            args: list[str | int] = [change.kind, change.member, ttl, repr(change.at)]
            args += [change.seed, *costs]
            calls.append((keys, args))
        results = await pipelined(self._link.client, self._apply, calls)
        missing: dict[str, Target] = {}
        kept = []
        taken = []
        for change, result in zip(batch, results, strict=True):
            if isinstance(result, ResponseError):
                log.error("budget: redis refused a %s: %s", change.kind, result)
            elif int(result) < 0:
                target = change.targets[-int(result) - 1]
                missing[target.spent] = target
                kept.append(change)
                continue
            if change.row is not None:
                taken.append(change.row)
        for _ in batch:
            self._queue.popleft()
        self._queue.extendleft(reversed(kept))
        if taken and self._pending is not None:
            self._pending.forget(taken)
        return list(missing.values())

    async def _seed_locked(self, targets: list[Target]) -> None:
        client = self._link.client
        async with client.pipeline(transaction=False) as pipe:
            for target in targets:
                pipe.exists(target.spent)
            found = await pipe.execute()
        absent = [target for target, there in zip(targets, found, strict=True) if not there]
        if not absent:
            return
        # Every change queued so far has its row in the ledger: the seed read next counts it.
        bound = self._next_seq
        read_at = self._clock.now()
        try:
            figures = await asyncio.to_thread(self._read_ledger, absent)
        except Exception as error:
            # Told apart from Redis's own errors: the link is fine, the ledger is not.
            reason = " ".join(str(error).split())[:300] or type(error).__name__
            if not self._unreadable:
                # One line per failing spell: every reserve meanwhile would say it again.
                log.warning(
                    "budget: budgeted paid rungs refuse until their spend can be read "
                    "from the ledger: %s",
                    reason,
                )
                self._unreadable = True
            raise LedgerUnreadable(reason) from None
        if self._unreadable:
            log.warning("budget: the ledger can be read again; budgets hold once more")
            self._unreadable = False
        now = self._clock.now()
        calls = []
        for target in absent:
            spent, marks = figures[(target.grouping, target.start)]
            ttl = max(3600, int(target.end - now) + _KEEP_PAST_PERIOD_S)
            # A ledger's sum below zero could only come from rows that credited: never seed one.
            seeded = max(0, nano(spent.get(target.name, 0.0)))
            args: list[str | int] = [seeded, ttl, repr(read_at), secrets.token_hex(8)]
            args += marks.get(target.name, ())
            calls.append(([target.spent], args))
        won = await pipelined(client, self._seed, calls)
        for target, landed in zip(absent, won, strict=True):
            if landed == 1:
                self._covered[target.spent] = bound
        if self.on_missing is not None:
            self.on_missing()

    def _read_ledger(
        self, targets: list[Target]
    ) -> dict[tuple[Grouping, float], tuple[Mapping[str, float], dict[str, list[str]]]]:
        """Each period's spend by name, and the crash rows it counts (marker fields)."""
        periods = {(target.grouping, target.start) for target in targets}
        # Crash rows first: each one named here is also in the spend read after it.
        crashed = []
        if self._unrecorded is not None:
            crashed = list(self._unrecorded(min(start for _, start in periods)))
        figures = {}
        for grouping, start in periods:
            marks: dict[str, list[str]] = {}
            for row in crashed:
                name = row.rung if grouping == "rung" else row.client_key
                if name is not None and row.started_at >= start:
                    marks.setdefault(name, []).append(crash_marker(row.request_id))
            figures[(grouping, start)] = (self._spent_since(start, grouping), marks)
        return figures


async def pipelined(
    client: Redis, script: AsyncScript, calls: list[tuple[list[str], list[str | int]]]
) -> list[Any]:
    """Run `script` once per (keys, args) in one pipeline: one round trip.

    Every call must be idempotent: a Redis that lost its scripts (it restarted) answers the
    whole batch NOSCRIPT, and the batch is sent again once the script is loaded."""
    for attempt in range(2):
        async with client.pipeline(transaction=False) as pipe:
            for keys, args in calls:
                pipe.evalsha(script.sha, len(keys), *keys, *args)
            results: list[Any] = await pipe.execute(raise_on_error=False)
        if attempt or not any(isinstance(each, NoScriptError) for each in results):
            break
        script.sha = await client.script_load(script.script)
    for result in results:
        if isinstance(result, Exception) and not isinstance(result, ResponseError):
            raise result
    return results


def crash_marker(request_id: str) -> str:
    """The field that marks a crash row's cost as counted in a spend hash."""
    return f"r:{request_id}"


async def stopped(task: asyncio.Task[None], within_s: float = 2.0) -> None:
    """Wait for `task` to end, cancelling it if it has not within `within_s`."""
    await asyncio.wait([task], timeout=within_s)
    if not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=within_s)
    if task.done() and not task.cancelled():
        with contextlib.suppress(Exception):
            task.result()
