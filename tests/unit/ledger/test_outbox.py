"""The outbox: every row the local ledger gains waits there for PostgreSQL, whichever way
it came (the writer, the journal's recovery after a kill, an `unrecorded` reservation),
and a claimed batch is no other drain's until it is sent, given back or stale."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from rungway.engine.record import RequestRecord
from rungway.ledger.outbox import Outbox
from rungway.ledger.pg_schema import COLUMNS
from rungway.ledger.sqlite import SqliteLedger
from tests.records import request_record

NOW = 1_796_000_000.0


def _row(request_id: str, cost: float = 0.0) -> RequestRecord:
    return request_record(request_id=request_id, started_at=NOW, rung="cheap", cost_usd=cost)


def _waiting(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [name for (name,) in db.execute("SELECT request_id FROM outbox ORDER BY seq")]
    finally:
        db.close()


def test_written_rows_wait_in_the_outbox_in_order(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    ledger = SqliteLedger(path, outbox=True)
    for name in ("a", "b", "c"):
        ledger.record(_row(name))
    ledger.close()
    assert _waiting(path) == ["a", "b", "c"]


def test_turning_the_outbox_on_queues_the_history_and_off_drops_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    before = SqliteLedger(path)
    before.record(_row("old"))
    before.close()
    on = SqliteLedger(path, outbox=True)
    on.record(_row("new"))
    on.close()
    assert _waiting(path) == ["old", "new"]
    SqliteLedger(path).close()
    db = sqlite3.connect(path)
    names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    assert "outbox" not in names
    assert "requests_to_outbox" not in names


def test_a_claimed_batch_is_nobody_elses_until_given_back_or_stale(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    ledger = SqliteLedger(path, outbox=True)
    for n in range(5):
        ledger.record(_row(f"r{n}"))
    ledger.close()
    first, second = Outbox(path, stale_s=30), Outbox(path, stale_s=30)
    try:
        batch = first.take(3, NOW)
        assert [row[0] for row in batch.rows] == ["r0", "r1", "r2"]
        assert len(batch.rows[0]) == len(COLUMNS)
        assert [row[0] for row in second.take(10, NOW).rows] == ["r3", "r4"]
        assert second.take(10, NOW + 1).rows == []
        first.give_back(batch)
        again = second.take(10, NOW + 1)
        assert [row[0] for row in again.rows] == ["r0", "r1", "r2"]
        # A claim whose drain died is taken again once it is stale.
        assert [row[0] for row in first.take(10, NOW + 32).rows] == ["r0", "r1", "r2", "r3", "r4"]
        assert first.waiting() == 5
        first.release_claims()
        done = second.take(10, NOW + 33)
        assert second.sent(done) == 0
    finally:
        first.close()
        second.close()


# Settles two paid requests and opens a third reservation, then dies by SIGKILL before the
# ledger's writer (which gathers rows for 50 ms) can commit anything.
_CRASHING_CHILD = """
import os, signal, sys
from pathlib import Path
from rungway.budget import Reservation
from rungway.engine.record import RequestRecord
from rungway.ledger.sqlite import SqliteLedger
from rungway.routing.rungs import Rung

def row(request_id, cost):
    return RequestRecord(
        request_id, {now}, None, "openai_chat", "m", "m", "openai", "c", "m", "ok", 200,
        False, 1.0, None, rung="cheap", cost_usd=cost,
    )

ledger = SqliteLedger(Path(sys.argv[1]), outbox=True)
for n in range(2):
    held = Reservation(n + 1, Rung.CHEAP, None, 0.5, {now} + 60)
    ledger.opened(held)
    ledger.record(row(f"paid-{{n}}", 0.01), settles=held)
ledger.opened(Reservation(3, Rung.CHEAP, "alice", 0.25, {now} + 60))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_rows_a_kill_left_in_the_journal_reach_the_outbox_at_restart(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CRASHING_CHILD.format(now=NOW)), str(path)],
        check=False,
        capture_output=True,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert _waiting(path) == []
    SqliteLedger(path, outbox=True).close()
    waiting = _waiting(path)
    paid = sorted(name for name in waiting if name.startswith("paid-"))
    lost = [name for name in waiting if name.startswith("unrecorded-")]
    assert (paid, len(lost), len(waiting)) == (["paid-0", "paid-1"], 1, 3)
