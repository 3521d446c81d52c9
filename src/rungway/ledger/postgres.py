"""The ledger on PostgreSQL, shared by every replica of a cluster.

Each gateway process still writes its own SQLite ledger and money journal exactly as a
lone gateway does: that file is its crash-safe buffer. `PostgresLedger` drains the file's
outbox into PostgreSQL (`drain.py`) and answers every report from PostgreSQL, so
`/admin/spend`, `/admin/requests`, the dashboard, `rungway spend` and `rungway explain`
see the whole cluster. The budget keeps reading the local ledger: it is this process's,
and it reads on the request path, where a network round trip does not belong.

The admin API calls the read methods from a worker thread; they run their query on the
gateway's event loop, on the drain's connection pool, and wait for it. Without a gateway
(the CLI), `PostgresReader` answers the same reads over a connection of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from abc import ABC, abstractmethod
from typing import Any, TypeVar

import asyncpg

from rungway.budget.local import Grouping
from rungway.cluster.health import StoreHealth
from rungway.ledger import pg_reports
from rungway.ledger.drain import OutboxDrain, Query, address_of
from rungway.ledger.outbox import Outbox
from rungway.ledger.report import Dimension, LedgerUnavailable, SpendReport
from rungway.ledger.sqlite import SqliteLedger

T = TypeVar("T")
READ_TIMEOUT_S = 15.0
"""How long a report may take, the drain's catching up included."""
STOP_DEADLINE_S = 3.0
"""How long shutdown spends sending the rows that still wait."""


class _Reports(ABC):
    """The ledger's reads from PostgreSQL; a subclass says how a query is run."""

    schema: str

    def spend_report(self, since: float, until: float, by: Dimension) -> SpendReport:
        """Requests, tokens and costs from `since` to `until`, grouped by `by`."""
        return self._read(lambda c: pg_reports.spend_report(c, self.schema, since, until, by))

    def spent_since(self, since: float, by: Grouping = "rung") -> dict[str, float]:
        """Incremental cost per rung (or per client key) of the cluster's requests."""
        return self._read(lambda c: pg_reports.spent_since(c, self.schema, since, by))

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` rows, newest first, without their route plans."""
        return self._read(lambda c: pg_reports.recent(c, self.schema, limit))

    def matching(self, prefix: str, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` rows whose id starts with `prefix`, oldest first, with plans."""
        return self._read(lambda c: pg_reports.matching(c, self.schema, prefix, limit))

    @abstractmethod
    def _read(self, query: Query[T]) -> T: ...


class PostgresLedger(_Reports):
    """Reports from PostgreSQL; rows from the local SQLite ledger, drained into it."""

    def __init__(self, local: SqliteLedger, dsn: str, schema: str, **drain: float) -> None:
        self.local = local
        self.schema = schema
        self.drain = OutboxDrain(Outbox(local.path), dsn, schema, **drain)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Start draining; never raises when PostgreSQL is unreachable."""
        self._loop = asyncio.get_running_loop()
        await self.drain.start()

    async def stop(self, deadline_s: float = STOP_DEADLINE_S) -> None:
        """Send what the local ledger holds within `deadline_s`, then stop draining."""
        await asyncio.to_thread(self.local.flush)
        await self.drain.stop(deadline_s)
        self._loop = None

    def health(self) -> StoreHealth:
        """PostgreSQL's health and how many rows wait to reach it."""
        return self.drain.health()

    def flush(self) -> None:
        """Wait until the local ledger has committed what is queued and, while PostgreSQL
        answers, until the drain has sent it (at most a few seconds)."""
        self.local.flush()
        loop = self._loop
        if loop is not None and _elsewhere(loop):
            future = asyncio.run_coroutine_threadsafe(self.drain.drain_now(5.0), loop)
            future.result(timeout=READ_TIMEOUT_S)

    def _read(self, query: Query[T]) -> T:
        loop = self._loop
        if loop is None:
            raise LedgerUnavailable("the gateway has not started its postgres ledger")
        if not _elsewhere(loop):
            raise RuntimeError("a PostgresLedger read blocks: call it from a worker thread")
        # Rows the writer still queues must reach the outbox before the drain looks.
        self.local.flush()
        future = asyncio.run_coroutine_threadsafe(self.drain.read(query), loop)
        try:
            return future.result(timeout=READ_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise LedgerUnavailable(
                f"postgres at {self.drain.address} did not answer within {READ_TIMEOUT_S:.0f}s"
            ) from None


class PostgresReader(_Reports):
    """The ledger's reads from PostgreSQL for a command with no gateway: one connection
    per read."""

    def __init__(self, dsn: str, schema: str, *, timeout_s: float = 5.0) -> None:
        self.address = address_of(dsn)
        self.schema = schema
        self._dsn = dsn
        self._timeout_s = timeout_s

    def _read(self, query: Query[T]) -> T:
        return asyncio.run(self._once(query))

    async def _once(self, query: Query[T]) -> T:
        try:
            connection = await asyncpg.connect(self._dsn, timeout=self._timeout_s)
        except (TimeoutError, OSError, asyncpg.PostgresError) as error:
            raise LedgerUnavailable(f"postgres at {self.address}: {error}") from None
        try:
            if not await _has_ledger(connection, self.schema):
                raise LedgerUnavailable(
                    f"postgres at {self.address} has no rungway ledger in schema "
                    f"{self.schema!r} yet: a gateway makes it when it first starts"
                )
            return await query(connection)
        finally:
            await connection.close()


async def _has_ledger(connection: asyncpg.Connection, schema: str) -> bool:
    found = await connection.fetchval(
        "SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'requests'", schema
    )
    return found is not None


def _elsewhere(loop: asyncio.AbstractEventLoop) -> bool:
    """True when the caller is not `loop`'s own thread (so waiting on it cannot deadlock)."""
    try:
        return asyncio.get_running_loop() is not loop
    except RuntimeError:
        return True
