"""Spend reports: both ledgers group, bound and add up the same rows the same way."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import astuple
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.budget.period import period_bounds
from rungway.engine.record import RequestRecord
from rungway.ledger.memory import MemoryLedger
from rungway.ledger.report import DIMENSIONS, Dimension, SpendReport, SpendRow, spend_report
from rungway.ledger.sqlite import SqliteLedger
from rungway.protocol.usage import ReportedUsage
from tests.records import request_record

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()
DAY = period_bounds("day", NOW)
MONTH = period_bounds("month", NOW)


def _record(
    number: int,
    *,
    started_at: float = NOW,
    rung: str | None = "subscription",
    connection: str | None = "plan",
    key: str | None = "laptop",
    upstream_model: str | None = "claude-sonnet-4-5",
    resolved_model: str = "claude-sonnet-4-5",
    tokens: tuple[int, int, int, int, int] = (100, 20, 0, 0, 0),
    cost: float = 0.0,
    list_cost: float | None = 0.001,
) -> RequestRecord:
    return request_record(
        request_id=f"r{number}",
        started_at=started_at,
        client_key=key,
        api="anthropic",
        requested_model=resolved_model,
        resolved_model=resolved_model,
        provider="anthropic" if connection else None,
        connection_id=connection,
        upstream_model=upstream_model,
        outcome="ok" if connection else "server",
        status=200 if connection else 502,
        latency_ms=10.0,
        ttfb_ms=None,
        usage=ReportedUsage(*tokens),
        rung=rung,
        cost_usd=cost,
        list_cost_usd=list_cost,
    )


RECORDS = (
    _record(1, tokens=(100, 20, 300, 50, 0), cost=0.0, list_cost=0.004),
    _record(2, rung="premium", connection="api", cost=0.0123, list_cost=0.0123),
    _record(
        3,
        rung="cheap",
        connection="router",
        key=None,
        upstream_model="deepseek/deepseek-chat",
        resolved_model="deepseek-chat",
        tokens=(1000, 200, 0, 0, 150),
        # The upstream's own figure is below list price: the difference is saved too.
        cost=0.0003,
        list_cost=0.0005,
    ),
    _record(
        4,
        rung="premium",
        connection="custom",
        upstream_model="in-house",
        resolved_model="in-house",
        cost=0.002,
        list_cost=None,
    ),
    # Every connection failed: no rung, no connection, no upstream model.
    _record(5, rung=None, connection=None, upstream_model=None, tokens=(0, 0, 0, 0, 0)),
)


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Iterator[SqliteLedger]:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite3")
    yield ledger
    ledger.close()


def _both(records: Sequence[RequestRecord], path: Path) -> tuple[MemoryLedger, SqliteLedger]:
    memory, sqlite = MemoryLedger(), SqliteLedger(path)
    for record in records:
        memory.record(record)
        sqlite.record(record)
    return memory, sqlite


def _numbers(row: SpendRow) -> tuple[float, ...]:
    return tuple(astuple(row)[1:])


def _assert_same(one: SpendReport, other: SpendReport) -> None:
    assert [row.group for row in one.rows] == [row.group for row in other.rows]
    for mine, theirs in zip(one.rows, other.rows, strict=True):
        assert _numbers(mine) == pytest.approx(_numbers(theirs), abs=1e-12)


@pytest.mark.parametrize("by", DIMENSIONS)
def test_both_ledgers_agree_on_every_grouping(tmp_path: Path, by: Dimension) -> None:
    memory, sqlite = _both(RECORDS, tmp_path / "ledger.sqlite3")
    try:
        _assert_same(memory.spend_report(*MONTH, by), sqlite.spend_report(*MONTH, by))
    finally:
        sqlite.close()


def test_rungs_come_in_ladder_order_with_rowless_requests_last() -> None:
    ledger = MemoryLedger()
    for record in RECORDS:
        ledger.record(record)
    report = ledger.spend_report(*MONTH, "rung")
    assert [row.group for row in report.rows] == ["subscription", "cheap", "premium", "none"]
    assert report.row("premium").requests == 2
    assert report.row("none") == SpendRow("none", 1, 0, 0, 0, 0.0, 0.001, 0.001, 0)


def test_groups_fall_back_when_a_field_is_empty(sqlite_ledger: SqliteLedger) -> None:
    for record in RECORDS:
        sqlite_ledger.record(record)
    by_key = sqlite_ledger.spend_report(*MONTH, "key")
    assert {row.group: row.requests for row in by_key.rows} == {"laptop": 4, "(no key)": 1}
    by_connection = sqlite_ledger.spend_report(*MONTH, "connection")
    assert by_connection.row("none").requests == 1
    # Other groupings put the dearest first.
    assert [row.group for row in by_connection.rows][:2] == ["api", "custom"]
    by_model = sqlite_ledger.spend_report(*MONTH, "model")
    assert {row.group for row in by_model.rows} == {
        "claude-sonnet-4-5",
        "deepseek/deepseek-chat",
        "in-house",
    }
    assert by_model.row("claude-sonnet-4-5").requests == 3, "the failed request's own model"


def test_tokens_count_cache_as_input_and_reasoning_apart(sqlite_ledger: SqliteLedger) -> None:
    for record in RECORDS:
        sqlite_ledger.record(record)
    subscription = sqlite_ledger.spend_report(*MONTH, "rung").row("subscription")
    assert (subscription.input_tokens, subscription.output_tokens) == (450, 20)
    cheap = sqlite_ledger.spend_report(*MONTH, "rung").row("cheap")
    assert (cheap.input_tokens, cheap.output_tokens, cheap.reasoning_tokens) == (1000, 200, 150)


def test_savings_are_list_price_minus_cost_over_priced_rows(sqlite_ledger: SqliteLedger) -> None:
    for record in RECORDS:
        sqlite_ledger.record(record)
    report = sqlite_ledger.spend_report(*MONTH, "rung")
    assert report.row("subscription").savings_usd == pytest.approx(0.004)
    assert report.row("cheap").savings_usd == pytest.approx(0.0002)
    premium = report.row("premium")
    # The unpriced request costs what it costs, but saves nothing and lists nothing.
    assert premium.cost_usd == pytest.approx(0.0143)
    assert premium.list_cost_usd == pytest.approx(0.0123)
    assert premium.savings_usd == pytest.approx(0.0)
    assert premium.unpriced_requests == 1
    total = report.total
    assert total.group == "total"
    assert total.requests == 5
    assert total.cost_usd == pytest.approx(0.0146)
    assert total.list_cost_usd == pytest.approx(0.004 + 0.0123 + 0.0005 + 0.001)
    assert total.savings_usd == pytest.approx(0.004 + 0.0002 + 0.001)
    assert total.unpriced_requests == 1


def test_a_period_holds_only_its_own_rows(tmp_path: Path) -> None:
    since, until = DAY
    records = [
        _record(1, started_at=since, cost=0.5, rung="cheap"),
        _record(2, started_at=since - 1, cost=0.25, rung="cheap"),
        _record(3, started_at=until, cost=0.125, rung="cheap"),
        _record(4, started_at=until - 0.001, cost=1.0, rung="cheap"),
    ]
    memory, sqlite = _both(records, tmp_path / "ledger.sqlite3")
    try:
        for ledger in (memory, sqlite):
            day = ledger.spend_report(since, until, "rung")
            assert (day.since, day.until, day.by) == (since, until, "rung")
            assert day.row("cheap").requests == 2
            assert day.row("cheap").cost_usd == pytest.approx(1.5)
            month = ledger.spend_report(*MONTH, "rung")
            assert month.row("cheap").requests == 4
    finally:
        sqlite.close()


def test_an_empty_or_missing_ledger_reports_nothing(tmp_path: Path) -> None:
    missing = spend_report(tmp_path / "none.sqlite3", since=MONTH[0], until=MONTH[1], by="key")
    assert missing.rows == ()
    assert missing.total == SpendRow("total")
    assert missing.row("laptop") == SpendRow("laptop")
    assert MemoryLedger().spend_report(*MONTH, "model").rows == ()


_RECORDS = st.lists(
    st.builds(
        lambda n, day, rung, key, model, tokens, cost, listed: _record(
            n,
            started_at=MONTH[0] + day * 86_400.0 - 3_600.0,
            rung=rung,
            connection=None if rung is None else f"c-{rung}",
            key=key,
            upstream_model=model,
            tokens=tokens,
            cost=cost,
            list_cost=listed,
        ),
        st.integers(0, 10**6),
        st.integers(0, 32),
        st.sampled_from([None, "subscription", "free", "cheap", "premium"]),
        st.sampled_from([None, "laptop", "ci"]),
        st.sampled_from([None, "m1", "m2"]),
        st.tuples(*[st.integers(0, 10**6)] * 5),
        st.floats(0, 10, allow_nan=False),
        st.none() | st.floats(0, 10, allow_nan=False),
    ),
    max_size=25,
    unique_by=lambda record: record.request_id,
)


@settings(deadline=None)
@given(records=_RECORDS, by=st.sampled_from(DIMENSIONS))
def test_both_ledgers_agree_on_any_records(records: list[RequestRecord], by: Dimension) -> None:
    with tempfile.TemporaryDirectory() as folder:
        memory, sqlite = _both(records, Path(folder) / "ledger.sqlite3")
        try:
            mine, theirs = memory.spend_report(*MONTH, by), sqlite.spend_report(*MONTH, by)
        finally:
            sqlite.close()
    assert {row.group for row in mine.rows} == {row.group for row in theirs.rows}
    for row in mine.rows:
        other = theirs.row(row.group)
        assert _numbers(row) == pytest.approx(_numbers(other), rel=1e-9, abs=1e-9)
    assert mine.total.requests == sum(
        1 for record in records if MONTH[0] <= record.started_at < MONTH[1]
    )
