"""The money journal: a process killed outright loses no settled row and no reservation:
each reservation left open becomes an `unrecorded` row costing its ceiling."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rungway.budget import HeldFor, Reservation
from rungway.ledger.journal import journal_path
from rungway.ledger.sqlite import SqliteLedger, read_rows
from rungway.routing.rungs import Rung
from tests.records import request_record

NOW = 1_796_000_000.0

# Settles three paid requests and opens a fourth reservation, then dies by SIGKILL before
# the ledger's writer (which gathers rows for 50 ms) can commit anything.
_CRASHING_CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from rungway.budget import LocalBudget
from rungway.engine.record import RequestRecord
from rungway.ledger.sqlite import SqliteLedger
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings

def row(request_id, rung, cost):
    return RequestRecord(
        request_id, {now}, None, "openai_chat", "m", "m", "openai", "c", "m", "ok", 200,
        False, 1.0, None, rung=rung, cost_usd=cost,
    )

ledger = SqliteLedger(Path(sys.argv[1]))
budget = LocalBudget(
    LadderSettings(rung_budget_usd=dict(cheap=10)), ledger.spent_since, log=ledger
)
for n in range(3):
    held = asyncio.run(budget.reserve(Rung.CHEAP, None, 0.5, {now}))
    budget.settle(held, 0.01, {now})
    ledger.record(row(f"paid-{{n}}", "cheap", 0.01), settles=held)
ledger.record(row("free-0", "keyless", 0.0))
asyncio.run(budget.reserve(Rung.CHEAP, "alice", 0.25, {now}))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_process_leaves_its_paid_rows_and_open_reservations(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CRASHING_CHILD.format(now=NOW)), str(path)],
        check=False,
        capture_output=True,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    killed = sqlite3.connect(path)
    assert killed.execute("SELECT COUNT(*) FROM requests").fetchone() == (0,)
    killed.close()

    ledger = SqliteLedger(path)
    try:
        rows = {row["request_id"]: row for row in read_rows(path)}
        [orphan] = [name for name in rows if name.startswith("unrecorded-")]
        assert set(rows) == {"paid-0", "paid-1", "paid-2", orphan}
        assert all(rows[f"paid-{n}"]["cost_usd"] == 0.01 for n in range(3))
        # The reservation in flight at the kill is a row of its own, costing its ceiling.
        lost = rows[orphan]
        assert (lost["outcome"], lost["rung"], lost["client_key"]) == (
            "unrecorded",
            "cheap",
            "alice",
        )
        assert lost["cost_usd"] == 0.25
        assert ledger.spent_since(NOW - 1) == {"cheap": pytest.approx(0.28)}
        assert ledger.journal.open_reservations() == []
    finally:
        ledger.close()


def test_committed_rows_leave_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    ledger = SqliteLedger(path)
    held = Reservation(1, Rung.PREMIUM, None, 1.0, expires_at=NOW + 60)
    ledger.opened(held)
    ledger.record(
        request_record(
            request_id="paid",
            started_at=NOW,
            connection_id="anthropic",
            stream=True,
            latency_ms=1.0,
            ttfb_ms=None,
            rung="premium",
            cost_usd=0.2,
        ),
        settles=held,
    )
    ledger.flush()
    # The copy goes with the next settle, or when the ledger closes.
    ledger.close()
    journal = sqlite3.connect(journal_path(path))
    try:
        assert journal.execute("SELECT COUNT(*) FROM settled").fetchone() == (0,)
        assert journal.execute("SELECT COUNT(*) FROM reservations").fetchone() == (0,)
    finally:
        journal.close()
    assert [row["request_id"] for row in read_rows(path)] == ["paid"]
    assert os.path.exists(journal_path(path))


def test_an_open_reservation_becomes_a_row_naming_its_request(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    ledger = SqliteLedger(path)
    held_for = HeldFor("1re9abcd0001", NOW, "openai_chat", "auto/thrifty", "c", "openai", "m")
    ledger.opened(Reservation(7, Rung.PREMIUM, None, 0.5, NOW + 60, held_for=held_for))
    ledger.close()  # as a crash would leave it: the reservation still open

    ledger = SqliteLedger(path)
    try:
        [row] = read_rows(path)
        assert ledger.journal.open_reservations() == []
        assert ledger.spend_report(NOW - 1, NOW + 1, "rung").row("premium").unrecorded_usd == 0.5
    finally:
        ledger.close()
    assert row["request_id"] == "1re9abcd0001"
    assert row["started_at"] == NOW
    assert (row["api"], row["requested_model"], row["connection_id"]) == (
        "openai_chat",
        "auto/thrifty",
        "c",
    )
    assert (row["provider"], row["upstream_model"], row["rung"]) == ("openai", "m", "premium")
    assert (row["outcome"], row["cost_usd"], row["list_cost_usd"]) == ("unrecorded", 0.5, None)
