"""The outbox: the local ledger's rows that have not reached PostgreSQL yet.

With `ledger.postgres` set, the local SQLite ledger keeps an `outbox` table that a trigger
fills on every insert into `requests`. Rows therefore enter it whichever way they reach
the ledger: the writer thread's batches, the money journal's recovery after a crash, and
the `unrecorded` rows made from reservations a crash left open. The drain
(`drain.py`) claims a batch, copies it into PostgreSQL and deletes it; a batch whose copy
failed is given back. The local file is thus the buffer that survives both a lost
PostgreSQL and a killed process.

Several worker processes may share one ledger file, so a batch is claimed (a random token
and an instant) before it is sent: two drains do not send the same rows, and a claim whose
process died is taken again once it is stale. Sending a row twice would still be harmless,
since PostgreSQL drops a request id it already holds.
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rungway.ledger.pg_schema import COLUMNS

_TABLE = """
CREATE TABLE outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    claim INTEGER,
    claimed_at REAL
)
"""
_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS requests_to_outbox AFTER INSERT ON requests
BEGIN
    INSERT INTO outbox (request_id) VALUES (NEW.request_id);
END
"""
_SELECT = (
    "SELECT "
    + ", ".join(f"r.{name}" for name in COLUMNS)
    + " FROM outbox o JOIN requests r ON r.request_id = o.request_id WHERE o.claim = ?"
    + " ORDER BY o.seq"
)


def prepare_outbox(db: sqlite3.Connection, *, enabled: bool) -> None:
    """Make (or drop) the outbox and its trigger in the ledger `db` holds.

    Made anew, the outbox starts with every row the ledger already has, so PostgreSQL
    gets this ledger's whole history; dropped, nothing fills a table nobody drains.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        # Looked at inside the transaction: workers that open a new ledger at once would
        # otherwise each find no outbox and each make one.
        exists = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'outbox'").fetchone()
        if enabled:
            if not exists:
                db.execute(_TABLE)
                db.execute(
                    "INSERT INTO outbox (request_id) SELECT request_id FROM requests "
                    "ORDER BY started_at"
                )
            db.execute(_TRIGGER)
        else:
            db.execute("DROP TRIGGER IF EXISTS requests_to_outbox")
            db.execute("DROP TABLE IF EXISTS outbox")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@dataclass(frozen=True, slots=True)
class Batch:
    """Rows claimed for one trip to PostgreSQL, in the order of `pg_schema.COLUMNS`."""

    claim: int
    rows: list[tuple[Any, ...]]


class Outbox:
    """The drain's own connection to the ledger's outbox; called from one thread at a time."""

    def __init__(self, path: Path, *, stale_s: float = 30.0) -> None:
        self.path = path
        self._stale_s = stale_s
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=5000")

    def take(self, limit: int, now: float) -> Batch:
        """Claim up to `limit` of the oldest unclaimed rows (or stale claims) and read them."""
        claim = secrets.randbits(62)
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "UPDATE outbox SET claim = ?, claimed_at = ? WHERE seq IN ("
                "SELECT seq FROM outbox WHERE claim IS NULL OR claimed_at < ? "
                "ORDER BY seq LIMIT ?)",
                (claim, now, now - self._stale_s, limit),
            )
            rows = db.execute(_SELECT, (claim,)).fetchall()
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return Batch(claim, rows)

    def sent(self, batch: Batch) -> int:
        """PostgreSQL holds the batch: delete it; how many rows still wait."""
        self._db.execute("DELETE FROM outbox WHERE claim = ?", (batch.claim,))
        return self.waiting()

    def give_back(self, batch: Batch) -> int:
        """The batch did not reach PostgreSQL: let the next take claim it again; how many
        rows wait."""
        self._db.execute(
            "UPDATE outbox SET claim = NULL, claimed_at = NULL WHERE claim = ?", (batch.claim,)
        )
        return self.waiting()

    def release_claims(self) -> None:
        """Give back every claim, at start: a killed process's claims must not wait until
        they are stale. A live sibling's batch may then be sent twice, which is harmless."""
        self._db.execute(
            "UPDATE outbox SET claim = NULL, claimed_at = NULL WHERE claim IS NOT NULL"
        )

    def waiting(self) -> int:
        """How many rows have not reached PostgreSQL yet."""
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        self._db.close()
