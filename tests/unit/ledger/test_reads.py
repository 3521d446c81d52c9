"""Reading rows back: both ledgers list and find the same rows in the same shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from rungway.engine.record import Attempt, RequestRecord
from rungway.ledger.memory import MemoryLedger
from rungway.ledger.sqlite import SqliteLedger
from rungway.protocol.usage import ReportedUsage
from tests.records import request_record

PLAN = orjson.dumps({"requested": "auto", "candidates": [], "skipped": []})


def _record(request_id: str, started_at: float, *, plan: bytes | None = PLAN) -> RequestRecord:
    return request_record(
        request_id=request_id,
        started_at=started_at,
        client_key="laptop",
        api="anthropic",
        requested_model="auto",
        resolved_model="auto",
        connection_id="api",
        stream=True,
        latency_ms=12.5,
        ttfb_ms=3.0,
        usage=ReportedUsage(100, 20, 5, 0, 2),
        attempts=(Attempt("plan", "rate_limit", 429, 4.0, "5h window spent"),),
        rung="premium",
        plan=plan,
        cost_usd=0.002,
        list_cost_usd=0.002,
    )


@pytest.fixture
def ledgers(tmp_path: Path) -> Iterator[tuple[MemoryLedger, SqliteLedger]]:
    memory, sqlite = MemoryLedger(), SqliteLedger(tmp_path / "ledger.sqlite3")
    for ledger in (memory, sqlite):
        # Recorded out of order: the list sorts by start time, not by arrival.
        ledger.record(_record("aa01", 2.0))
        ledger.record(_record("aa02", 3.0, plan=None))
        ledger.record(_record("bb01", 1.0))
    yield memory, sqlite
    sqlite.close()


def test_recent_lists_newest_first_without_plans_alike(
    ledgers: tuple[MemoryLedger, SqliteLedger],
) -> None:
    memory, sqlite = ledgers
    listed = sqlite.recent(2)
    assert [row["request_id"] for row in listed] == ["aa02", "aa01"]
    assert all("plan" not in row for row in listed)
    assert listed[0]["attempts"] == [
        {
            "connection_id": "plan",
            "outcome": "rate_limit",
            "status": 429,
            "latency_ms": 4.0,
            "detail": "5h window spent",
        }
    ]
    assert memory.recent(2) == listed
    assert memory.recent(10) == sqlite.recent(10)


def test_matching_lists_every_row_a_prefix_names_with_its_plan_alike(
    ledgers: tuple[MemoryLedger, SqliteLedger],
) -> None:
    memory, sqlite = ledgers
    for ledger in ledgers:
        assert [row["request_id"] for row in ledger.matching("aa", 5)] == ["aa01", "aa02"]
        assert [row["request_id"] for row in ledger.matching("aa", 1)] == ["aa01"]
        assert ledger.matching("zz", 5) == []
        assert ledger.matching("a~", 5) == []
    (found,) = sqlite.matching("bb", 5)
    assert found["request_id"] == "bb01"
    assert found["plan"] == orjson.loads(PLAN)
    assert memory.matching("bb", 5) == [found]
    assert memory.matching("aa02", 5) == sqlite.matching("aa02", 5)
    assert sqlite.matching("aa02", 5)[0]["plan"] is None
