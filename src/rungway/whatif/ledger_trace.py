"""A trace from the gateway's own ledger: what its clients asked for, when, and how big.

Each ledger row gives one request: its start time, the model the client asked for (the
`requested_model` column, before aliases and `auto` ids resolve, so the replay resolves it
again against the config it is given, not the model that happened to serve it), its API,
its input, output, cache and reasoning tokens, whether it streamed, its client key, and
its session (the short hash the route plan keeps when session affinity held one).

Which rows are kept: every request an upstream served or began to serve. Rows without a
connection are refused requests (the ladder had nothing left, a budget was spent, a client
was over its rate) and rows a crash cut off in flight (outcome `unrecorded`): neither holds
any token count, since no reply ever arrived, so no policy could price them. They are left
out of the trace and counted in `LedgerTrace.refused` and `LedgerTrace.unrecorded`, for
the report to say how much of the period the trace does not cover.

The rows are read with one query over the `started_at` index and streamed from its cursor,
from the local SQLite ledger (`read_ledger_trace`) or, when the config names one, the
cluster's PostgreSQL ledger (`read_postgres_trace`), which holds every replica's rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from rungway.ledger.journal import UNRECORDED
from rungway.ledger.pg_schema import quoted
from rungway.ledger.postgres import PostgresReader
from rungway.whatif.trace import Trace, TraceError, TraceRequest

__all__ = ["LedgerTrace", "read_ledger_trace", "read_postgres_trace"]

_COLUMNS = (
    "started_at, requested_model, api, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, reasoning_tokens, stream, client_key, connection_id IS NULL, outcome"
)
# The session's short hash, which the route plan keeps when session affinity held it: the
# replay's prompt cache and pins follow it. SQLite may hold the plan as a blob.
_SQLITE = (
    f"SELECT {_COLUMNS}, json_extract(CAST(plan AS TEXT), '$.session') FROM requests"
    " WHERE started_at >= ? AND started_at < ? ORDER BY started_at"
)
_PREFETCH = 2_000
"""Rows PostgreSQL sends per round trip of the cursor."""


@dataclass(frozen=True, slots=True)
class LedgerTrace:
    """The requests of a ledger over a period, and the rows left out of them."""

    trace: Trace
    since: float
    until: float
    refused: int = 0
    """Requests the gateway refused without reaching an upstream: no tokens to replay."""
    unrecorded: int = 0
    """Requests a crash cut off in flight: their size was never known."""


def read_ledger_trace(
    path: Path, *, since: float = 0.0, until: float = float("inf")
) -> LedgerTrace:
    """The requests the SQLite ledger at `path` holds from `since` (inclusive) to `until`
    (exclusive), epoch seconds; a TraceError when there is no ledger there to read."""
    if not path.is_file():
        raise TraceError(f"no ledger at {path}: a gateway writes it when it serves requests")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise TraceError(f"cannot open the ledger at {path}: {error}") from None
    collector = _Collector()
    try:
        for row in db.execute(_SQLITE, (since, until)):
            collector.add(row)
    except sqlite3.Error as error:
        raise TraceError(f"cannot read the ledger at {path}: {error}") from None
    finally:
        db.close()
    return collector.trace(since, until)


def read_postgres_trace(
    reader: PostgresReader, *, since: float = 0.0, until: float = float("inf")
) -> LedgerTrace:
    """The same from the cluster's PostgreSQL ledger; `LedgerUnavailable` when it does not
    answer or holds no ledger yet."""

    async def query(connection: asyncpg.Connection) -> LedgerTrace:
        statement = (
            f"SELECT {_COLUMNS}, plan->>'session' FROM {quoted(reader.schema)}.requests "
            "WHERE started_at >= $1 AND started_at < $2 ORDER BY started_at"
        )
        # A cursor lives in a transaction; it sends the rows in batches, not all at once.
        collector = _Collector()
        async with connection.transaction(readonly=True):
            async for record in connection.cursor(statement, since, until, prefetch=_PREFETCH):
                collector.add(record)
        return collector.trace(since, until)

    # The reader's own round trip: one connection, its errors as LedgerUnavailable.
    return reader._read(query)


class _Collector:
    """Ledger rows, one at a time, into a trace; the rows without tokens counted apart."""

    def __init__(self) -> None:
        self.requests: list[TraceRequest] = []
        self.refused = self.unrecorded = 0

    def add(self, row: Sequence[Any]) -> None:
        at, model, api, tin, tout, read, write, reasoning, stream, key, bare, outcome, session = row
        if outcome == UNRECORDED:
            self.unrecorded += 1
        elif bare:
            self.refused += 1
        else:
            self.requests.append(
                TraceRequest(
                    at=at,
                    model=model,
                    api=api,
                    input_tokens=tin,
                    output_tokens=tout,
                    cache_read_tokens=read,
                    cache_write_tokens=write,
                    # Output includes reasoning; an upstream that counted them apart must
                    # not make one row stop the whole replay.
                    reasoning_tokens=min(reasoning, tout),
                    stream=bool(stream),
                    client_key=key,
                    session=session if isinstance(session, str) and session else None,
                )
            )

    def trace(self, since: float, until: float) -> LedgerTrace:
        return LedgerTrace(tuple(self.requests), since, until, self.refused, self.unrecorded)
