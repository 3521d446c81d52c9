"""The drain: copies the local ledger's outbox into PostgreSQL, off the request path.

A task on the gateway's event loop claims up to 500 rows from the outbox (in a thread:
SQLite never blocks the loop), copies them into a temporary table and inserts them into
`requests` with `ON CONFLICT (request_id) DO NOTHING`, then deletes them from the outbox.
A crash between the insert and the delete sends the rows again, and the conflict clause
drops them: a row is never written twice. COPY and one INSERT ... SELECT measured faster
than `executemany` and than `unnest` arrays for batches of 500 (bench/pg_ledger_insert.py).

While PostgreSQL does not answer, nothing is lost: rows wait in the outbox, the drain
retries every second, and `health()` says how many wait. PostgreSQL unreachable at start
is the same case. The drain never raises out of its task: any failure is logged, its batch
given back, and the next try made a moment later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg

from rungway.cluster.health import StoreHealth
from rungway.ledger.outbox import Batch, Outbox
from rungway.ledger.pg_schema import COLUMNS, migrate, quoted
from rungway.ledger.report import LedgerUnavailable

log = logging.getLogger("rungway.ledger")
T = TypeVar("T")
Query = Callable[[asyncpg.Connection], Awaitable[T]]
BATCH = 500


def address_of(dsn: str) -> str:
    """`host:port/db` of a DSN, without its user or password."""
    host, database = _server_of(dsn), _database_of(dsn)
    return f"{host}/{database}"


def missing_database(dsn: str) -> str:
    """What to tell the operator when the DSN's database does not exist on its server."""
    database = _database_of(dsn)
    return (
        f"the PostgreSQL database '{database}' does not exist at {_server_of(dsn)}; "
        f"create it with `createdb {database}`"
    )


def _server_of(dsn: str) -> str:
    parts = urlsplit(dsn)
    host = parts.hostname or "localhost"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{parts.port or 5432}"


def _database_of(dsn: str) -> str:
    parts = urlsplit(dsn)
    return parts.path.lstrip("/") or parts.username or "postgres"


class OutboxDrain:
    """Moves the outbox's rows into PostgreSQL, keeps the pool, and knows its health."""

    def __init__(
        self,
        outbox: Outbox,
        dsn: str,
        schema: str,
        *,
        interval_s: float = 0.5,
        retry_s: float = 1.0,
        timeout_s: float = 5.0,
    ) -> None:
        self.address = address_of(dsn)
        self._outbox = outbox
        self._dsn = dsn
        self._schema = schema
        self._interval_s = interval_s
        self._retry_s = retry_s
        self._timeout_s = timeout_s
        self._pool: asyncpg.Pool | None = None
        self._task: asyncio.Task[None] | None = None
        self._step_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._up = False
        self._down_since = time.time()
        self._error = "not yet reached"
        self._missing = False
        """The last failure was the database itself missing: the operator must create it."""
        self.waiting = 0
        """Rows in the outbox, as of the last look."""
        name = quoted(schema)
        columns = ", ".join(COLUMNS)
        self._staging = (
            f"CREATE TEMP TABLE IF NOT EXISTS rungway_outbox_in (LIKE {name}.requests) "
            "ON COMMIT DELETE ROWS"
        )
        self._insert = (
            f"INSERT INTO {name}.requests ({columns}) SELECT {columns} FROM rungway_outbox_in "
            "ON CONFLICT (request_id) DO NOTHING"
        )

    @property
    def up(self) -> bool:
        """True while PostgreSQL answered the last try."""
        return self._up

    def health(self) -> StoreHealth:
        """The ledger's PostgreSQL as the operator should see it."""
        rows = f"{self.waiting} rows waiting"
        if self._up:
            return StoreHealth("postgres", True, f"postgres at {self.address}: {rows}")
        if self._missing:
            # Not "unreachable": the server answers, and no retry helps until it exists.
            return StoreHealth(
                "postgres", False, f"{self._error} ({rows} in the local ledger meanwhile)"
            )
        ago = max(0, round(time.time() - self._down_since))
        return StoreHealth(
            "postgres",
            False,
            f"postgres at {self.address} unreachable for {ago}s ({self._error}); {rows} in "
            f"{self._outbox.path}, sent when it answers",
        )

    async def start(self) -> None:
        """Start draining in the background; never raises when PostgreSQL is unreachable."""
        await asyncio.to_thread(self._outbox.release_claims)
        self.waiting = await asyncio.to_thread(self._outbox.waiting)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def kick(self) -> None:
        """Look at the outbox now rather than at the next interval."""
        self._wake.set()

    async def drain_now(self, deadline_s: float) -> bool:
        """Send what waits until the outbox is empty or `deadline_s` has passed; whether it
        emptied."""
        until = time.monotonic() + deadline_s
        while time.monotonic() < until:
            try:
                if await asyncio.wait_for(self._step(), until - time.monotonic()) == 0:
                    return True
            except Exception:  # the step kept the reason for health(); the caller moves on
                return False
        return False

    async def read(self, query: Query[T]) -> T:
        """Run `query` on a pooled connection, after sending what waits (within a moment),
        so a read sees this process's own rows."""
        await self.drain_now(2.0)
        pool = self._pool
        if pool is None:
            raise LedgerUnavailable(self.health().detail)
        try:
            async with pool.acquire(timeout=self._timeout_s) as connection:
                return await query(connection)
        except (TimeoutError, OSError, asyncpg.InterfaceError) as error:
            self._lost(error)
            raise LedgerUnavailable(self.health().detail) from None
        except asyncpg.PostgresConnectionError as error:
            self._lost(error)
            raise LedgerUnavailable(self.health().detail) from None

    async def stop(self, deadline_s: float) -> None:
        """Send what waits within `deadline_s`, then stop and close the pool."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        emptied = self._pool is not None and await self.drain_now(deadline_s)
        if not emptied and self.waiting:
            log.warning(
                "ledger: %d rows still wait for postgres at %s; they are sent at the next start",
                self.waiting,
                self.address,
            )
        if self._pool is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._pool.close(), self._timeout_s)
        await asyncio.to_thread(self._outbox.close)

    async def _run(self) -> None:
        while True:
            try:
                sent = await self._step()
            except Exception:  # _step kept the reason for health(); try again shortly
                await asyncio.sleep(self._retry_s)
                continue
            if sent == 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._interval_s)
                self._wake.clear()

    async def _step(self) -> int:
        """Send one batch; how many rows it held (0: nothing waits). Raises when it fails."""
        async with self._step_lock:
            pool = self._pool
            if pool is None:
                # Count what waits even while PostgreSQL does not answer: health shows it.
                self.waiting = await asyncio.to_thread(self._outbox.waiting)
                pool = await self._join()
            batch = await asyncio.to_thread(self._outbox.take, BATCH, time.time())
            if not batch.rows:
                self.waiting = await asyncio.to_thread(self._outbox.sent, batch)
                return 0
            try:
                async with pool.acquire(timeout=self._timeout_s) as connection:
                    await self._send(connection, batch)
            except BaseException as error:
                given = asyncio.to_thread(self._outbox.give_back, batch)
                self.waiting = await asyncio.shield(given)
                if isinstance(error, Exception):
                    self._lost(error)
                raise
            self.waiting = await asyncio.to_thread(self._outbox.sent, batch)
            self._joined()
            return len(batch.rows)

    async def _send(self, connection: asyncpg.Connection, batch: Batch) -> None:
        async with connection.transaction():
            await connection.execute(self._staging)
            await connection.copy_records_to_table(
                "rungway_outbox_in", records=[_pg_row(row) for row in batch.rows], columns=COLUMNS
            )
            await connection.execute(self._insert)

    async def _join(self) -> asyncpg.Pool:
        try:
            pool = await asyncpg.create_pool(
                self._dsn,
                # No floor to keep: while PostgreSQL is away the pool would log each retry.
                min_size=0,
                max_size=2,
                timeout=self._timeout_s,
                command_timeout=self._timeout_s * 2,
            )
        except Exception as error:
            self._lost(error)
            raise
        try:
            async with pool.acquire(timeout=self._timeout_s) as connection:
                await migrate(connection, self._schema)
        except Exception as error:
            self._lost(error)
            await pool.close()
            raise
        self._pool = pool
        # Connected and migrated: it answers, whether or not rows wait.
        self._joined()
        return pool

    def _joined(self) -> None:
        if not self._up:
            if self._error != "not yet reached":
                log.warning("ledger: postgres at %s answers again; rows drain", self.address)
            self._up = True
            self._missing = False
            self._error = ""

    def _lost(self, error: BaseException) -> None:
        missing = isinstance(error, asyncpg.InvalidCatalogNameError)
        if missing:
            reason = missing_database(self._dsn)
        else:
            reason = " ".join(str(error).split())[:200] or type(error).__name__
        if missing and not self._missing:
            log.warning("ledger: %s", reason)  # once: each retry would only say it again
            self._down_since = time.time()
        elif self._up or self._error == "not yet reached" or (self._missing and not missing):
            log.warning(
                "ledger: postgres at %s unreachable (%s); rows wait in %s",
                self.address,
                reason,
                self._outbox.path,
            )
            self._down_since = time.time()
        self._up = False
        self._missing = missing
        self._error = reason


def _pg_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # SQLite keeps the stream flag as 0/1 and the plan as bytes; PostgreSQL's text types
    # refuse NUL, which a client may put in a model name, so it becomes U+FFFD.
    values = [value.replace("\x00", "\ufffd") if isinstance(value, str) else value for value in row]
    values[_STREAM] = bool(values[_STREAM])
    plan = values[_PLAN]
    if isinstance(plan, bytes):
        values[_PLAN] = plan.decode("utf-8", "replace")
    return tuple(values)


_STREAM = COLUMNS.index("stream")
_PLAN = COLUMNS.index("plan")
