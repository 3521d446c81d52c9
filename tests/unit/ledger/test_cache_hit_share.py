"""The cache-hit share in spend reports: cache-read input over all input, per group, the
same from the memory, SQLite and PostgreSQL ledgers, and None for a group without input."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rungway.budget.period import period_bounds
from rungway.engine.record import RequestRecord
from rungway.ledger.drain import OutboxDrain
from rungway.ledger.memory import MemoryLedger
from rungway.ledger.outbox import Outbox
from rungway.ledger.postgres import PostgresReader
from rungway.ledger.report import SpendReport, SpendRow
from rungway.ledger.sqlite import SqliteLedger
from rungway.protocol.usage import ReportedUsage
from tests.records import request_record
from tests.services import POSTGRES_DSN

T0 = 1_790_000_000.0
MONTH = period_bounds("month", T0)


def _record(number: int, connection: str | None, usage: ReportedUsage) -> RequestRecord:
    return request_record(
        request_id=f"r{number}",
        started_at=T0 + number,
        connection_id=connection,
        provider="anthropic" if connection else None,
        usage=usage,
    )


RECORDS = (
    # plan-a: 100 + 4000 read + 1000 written, then 50 + 5000 read: 9000 read of 10150.
    _record(1, "plan-a", ReportedUsage(100, 20, 4000, 1000, 0)),
    _record(2, "plan-a", ReportedUsage(50, 20, 5000, 0, 0)),
    # plan-b: a cold cache, all written.
    _record(3, "plan-b", ReportedUsage(100, 20, 0, 5100, 0)),
    # Refused before any upstream: no input at all.
    _record(4, None, ReportedUsage(0, 0, 0, 0, 0)),
)


def _shares(report: SpendReport) -> dict[str, float | None]:
    return {row.group: row.cache_hit_share for row in report.rows}


def _expected() -> dict[str, float | None]:
    return {"plan-a": 9000 / 10150, "plan-b": 0.0, "none": None}


def test_memory_and_sqlite_ledgers_report_each_connections_share(tmp_path: Path) -> None:
    memory, sqlite = MemoryLedger(), SqliteLedger(tmp_path / "ledger.sqlite3")
    try:
        for record in RECORDS:
            memory.record(record)
            sqlite.record(record)
        for ledger in (memory, sqlite):
            report = ledger.spend_report(*MONTH, "connection")
            assert _shares(report) == pytest.approx(_expected())
            assert report.row("plan-a").cache_read_tokens == 9000
            assert report.total.cache_hit_share == pytest.approx(9000 / 15350)
    finally:
        sqlite.close()


def test_a_group_without_input_has_no_share() -> None:
    assert SpendRow("none").cache_hit_share is None
    assert SpendRow("x", input_tokens=10, cache_read_tokens=0).cache_hit_share == 0.0


def test_the_postgres_ledger_reports_the_same_shares(tmp_path: Path, pg_schema: str) -> None:
    path = tmp_path / "ledger.sqlite3"
    writer = SqliteLedger(path, outbox=True)
    for record in RECORDS:
        writer.record(record)
    local = writer.spend_report(*MONTH, "connection")
    writer.close()

    async def drain() -> None:
        drained = OutboxDrain(Outbox(path), POSTGRES_DSN, pg_schema)
        await drained.start()
        assert await drained.drain_now(10.0)
        await drained.stop(2.0)

    asyncio.run(drain())
    shared = PostgresReader(POSTGRES_DSN, pg_schema).spend_report(*MONTH, "connection")
    assert _shares(shared) == pytest.approx(_expected())
    assert [row.cache_read_tokens for row in shared.rows] == [
        row.cache_read_tokens for row in local.rows
    ]
