"""The ledger's writer thread survives any row, and says so at once if it stops anyway.

A row SQLite cannot store as it is (a count past 64 bits, a NaN cost, a lone surrogate) is
written made storable, with a `ledger_repaired` attempt naming what was replaced, and the
rows after it are written as ever. A writer that stops for any other reason makes every
read fail at once with `LedgerUnavailable` instead of waiting for rows that never come.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rungway.budget import Reservation
from rungway.ledger.repair import REPAIRED, repaired
from rungway.ledger.report import LedgerUnavailable
from rungway.ledger.sqlite import SqliteLedger, read_rows
from rungway.protocol.usage import ReportedUsage
from rungway.routing.rungs import Rung
from tests.records import request_record


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SqliteLedger]:
    opened = SqliteLedger(tmp_path / "ledger.sqlite3")
    yield opened
    opened.close()


def _within(seconds: float, call: Callable[[], object]) -> object:
    """`call()`'s result, failing the test if it takes longer than `seconds`."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(_outcome(call)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still waiting after {seconds}s"
    return result[0]


def _outcome(call: Callable[[], object]) -> object:
    try:
        return call()
    except Exception as error:
        return error


UNSTORABLE: list[tuple[str, dict[str, Any]]] = [
    ("2^63 output tokens", {"usage": ReportedUsage(output_tokens=2**63)}),
    ("-2^64 input tokens", {"usage": ReportedUsage(input_tokens=-(2**64))}),
    ("a lone surrogate", {"requested_model": "model-\ud800"}),
    ("a value of no SQLite type", {"client_key": object()}),
]


@pytest.mark.parametrize(("name", "fields"), UNSTORABLE, ids=[name for name, _ in UNSTORABLE])
def test_a_row_sqlite_cannot_store_is_written_flagged_and_the_next_eight_follow(
    ledger: SqliteLedger, name: str, fields: dict[str, Any]
) -> None:
    ledger.record(request_record(request_id="bad", started_at=1.0, **fields))
    for n in range(8):
        ledger.record(request_record(request_id=f"next-{n}", started_at=2.0 + n))
    assert _within(5, ledger.flush) is None
    rows = {row["request_id"]: row for row in read_rows(ledger.path)}
    assert len(rows) == 9
    flags = [each for each in rows["bad"]["attempts"] if each["outcome"] == REPAIRED]
    assert len(flags) == 1
    assert "could not be stored" in flags[0]["detail"]
    assert ledger.stopped_writer() is None


@pytest.mark.parametrize(("name", "fields"), UNSTORABLE, ids=[name for name, _ in UNSTORABLE])
def test_a_paid_row_sqlite_cannot_store_reaches_its_journal_and_the_ledger(
    ledger: SqliteLedger, name: str, fields: dict[str, Any]
) -> None:
    held = Reservation(7, Rung.CHEAP, None, 0.5, 10.0)
    ledger.opened(held)
    row = request_record(request_id="paid", rung="cheap", cost_usd=0.5, **fields)
    ledger.record(row, settles=held)
    assert _within(5, ledger.flush) is None
    [written] = read_rows(ledger.path)
    assert (written["request_id"], written["cost_usd"]) == ("paid", 0.5)
    assert any(each["outcome"] == REPAIRED for each in written["attempts"])
    assert ledger.journal.open_reservations() == []


class _Exits:
    """A value whose adaptation for SQLite ends the thread that writes it."""

    def __conform__(self, protocol: object) -> object:
        raise SystemExit("the writer is made to stop")


def test_a_stopped_writer_makes_reads_fail_at_once_and_says_why(ledger: SqliteLedger) -> None:
    ledger.record(request_record(request_id="poison", client_key=_Exits()))
    deadline = time.monotonic() + 5
    while ledger.stopped_writer() is None:
        assert time.monotonic() < deadline, "the writer never stopped"
        time.sleep(0.01)
    stopped = ledger.stopped_writer()
    assert stopped is not None
    assert "SystemExit" in stopped
    ledger.record(request_record(request_id="after"))
    for read in (
        ledger.flush,
        lambda: ledger.recent(10),
        lambda: ledger.spend_report(0, 1, "rung"),
    ):
        error = _within(2, read)
        assert isinstance(error, LedgerUnavailable)
        assert "ledger writer has stopped" in str(error)
    # A budget seeds itself from what is on disk rather than fail the request it is for.
    assert _within(2, lambda: ledger.spent_since(0.0)) == {}


_VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(),
    st.binary(max_size=8),
    st.booleans(),
)


@settings(max_examples=60)
@given(values=st.lists(_VALUES, min_size=3, max_size=3))
def test_any_row_repaired_is_storable_and_flagged(values: list[Any]) -> None:
    columns = ["request_id", "connection_id", "attempts", "n"]
    row = repaired(["r", *values[:1], "[]", *values[1:2]], columns)
    for value in row:
        if isinstance(value, int):
            assert -(2**63) <= value < 2**63
        if isinstance(value, float):
            assert math.isfinite(value)
        if isinstance(value, str):
            value.encode()
    assert REPAIRED in row[2]
