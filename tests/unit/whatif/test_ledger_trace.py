"""A trace from the ledger the gateway writes: rows in time order, the model the client
asked for, tokens as recorded, and refused or crashed rows left out but counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rungway.ledger.drain import OutboxDrain
from rungway.ledger.journal import UNRECORDED
from rungway.ledger.outbox import Outbox
from rungway.ledger.postgres import PostgresReader
from rungway.ledger.report import LedgerUnavailable
from rungway.ledger.sqlite import SqliteLedger
from rungway.protocol.usage import ReportedUsage
from rungway.whatif.ledger_trace import read_ledger_trace, read_postgres_trace
from rungway.whatif.trace import TraceError, TraceRequest
from tests.records import request_record
from tests.services import POSTGRES_DSN

T0 = 1_790_000_000.0


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.sqlite3"
    # With its outbox, so the same rows can drain into PostgreSQL as a cluster's do.
    writer = SqliteLedger(path, outbox=True)
    # Written out of order: the trace is sorted by start time.
    writer.record(
        request_record(
            request_id="b",
            started_at=T0 + 60,
            client_key="laptop",
            api="openai_chat",
            requested_model="auto/thrifty",
            resolved_model="deepseek-chat",
            connection_id="cheap",
            upstream_model="deepseek-chat",
            stream=True,
            usage=ReportedUsage(300, 900, 0, 0, 200),
            rung="cheap",
            cost_usd=0.001,
            list_cost_usd=0.001,
        )
    )
    writer.record(
        request_record(
            request_id="a",
            started_at=T0,
            requested_model="claude-opus-4-1",
            resolved_model="claude-sonnet-4-5",
            upstream_model="claude-sonnet-4-5",
            usage=ReportedUsage(12, 640, 48_000, 2_100, 0),
        )
    )
    # Refused before any upstream: no connection, no tokens.
    writer.record(
        request_record(
            request_id="c",
            started_at=T0 + 90,
            connection_id=None,
            provider=None,
            upstream_model=None,
            outcome="budget_exhausted",
            status=429,
            rung=None,
        )
    )
    writer.record(request_record(request_id="d", started_at=T0 + 120, outcome=UNRECORDED))
    writer.record(
        request_record(
            request_id="e",
            started_at=T0 + 3_600,
            usage=ReportedUsage(5, 10, 0, 0, 0),
            plan=b'{"requested": "claude-sonnet-4-5", "session": "9f2c41d0"}',
        )
    )
    writer.close()
    return path


def test_the_ledger_gives_the_requests_as_clients_asked_them(ledger: Path) -> None:
    read = read_ledger_trace(ledger)
    assert read.trace == (
        TraceRequest(
            T0, "claude-opus-4-1", "anthropic_messages", 12, 640, 48_000, 2_100, 0, False, None
        ),
        TraceRequest(T0 + 60, "auto/thrifty", "openai_chat", 300, 900, 0, 0, 200, True, "laptop"),
        TraceRequest(
            T0 + 3_600, "claude-sonnet-4-5", "anthropic_messages", 5, 10, session="9f2c41d0"
        ),
    )
    assert (read.refused, read.unrecorded) == (1, 1)


def test_since_is_inclusive_and_until_exclusive(ledger: Path) -> None:
    read = read_ledger_trace(ledger, since=T0 + 60, until=T0 + 3_600)
    assert [request.at for request in read.trace] == [T0 + 60]
    assert (read.since, read.until, read.refused, read.unrecorded) == (T0 + 60, T0 + 3_600, 1, 1)
    assert read_ledger_trace(ledger, since=T0 + 3_601).trace == ()


def test_a_missing_ledger_is_a_trace_error_saying_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"no ledger at .*none\.sqlite3"):
        read_ledger_trace(tmp_path / "none.sqlite3")


def test_the_clusters_postgres_ledger_gives_the_same_trace(ledger: Path, pg_schema: str) -> None:
    async def drain() -> None:
        drained = OutboxDrain(Outbox(ledger), POSTGRES_DSN, pg_schema)
        await drained.start()
        assert await drained.drain_now(10.0)
        await drained.stop(2.0)

    asyncio.run(drain())
    reader = PostgresReader(POSTGRES_DSN, pg_schema)
    assert read_postgres_trace(reader) == read_ledger_trace(ledger)
    assert read_postgres_trace(reader, since=T0 + 60, until=T0 + 3_600) == read_ledger_trace(
        ledger, since=T0 + 60, until=T0 + 3_600
    )


def test_a_postgres_without_a_ledger_is_unavailable(pg_schema: str) -> None:
    with pytest.raises(LedgerUnavailable, match="has no rungway ledger"):
        read_postgres_trace(PostgresReader(POSTGRES_DSN, pg_schema))
