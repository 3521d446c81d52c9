"""The money journal: what a crash must not forget, written before the request goes on.

The ledger writes its rows in batches, off the request path, so the last few are still in
memory at any instant. For the rows that carry money that is not good enough, so a small
SQLite file beside the ledger (`<ledger>.journal`) keeps, committed at once:

- every open reservation, written before its attempt is sent, since the upstream may bill
  it whatever happens to this process;
- every settled row with a reservation or a cost, written before the client sees the end
  of its response, and deleted again once the ledger's batch holding it is committed.

At start-up the settled rows a crash left behind are copied into the ledger, and each open
reservation becomes a ledger row of its own with outcome `unrecorded`: its request was in
flight, so its upstream may have billed it, and nobody knows for how much. The row costs
the reservation's whole amount, its ceiling, so the budget keeps counting it and
`rungway spend` shows it until an operator reconciles it with the provider's bill.

Only the event loop's thread writes this file (the ledger writer hands over the ids it has
committed, and the next settle deletes them), so no write ever waits for a lock. Commits
are not synced to the disk: a killed process loses nothing the operating system already
holds, and a power cut could lose the last moments, as it could of the ledger itself.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rungway.budget.local import Reservation
from rungway.ledger.wal import use_wal
from rungway.routing.rungs import Rung

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reservations (
    id INTEGER PRIMARY KEY,
    rung TEXT NOT NULL,
    client_key TEXT,
    amount REAL NOT NULL,
    expires_at REAL NOT NULL,
    request_id TEXT,
    started_at REAL,
    api TEXT,
    model TEXT,
    connection_id TEXT,
    provider TEXT,
    upstream_model TEXT
);
"""
_HELD_FOR_COLUMNS = (
    "request_id",
    "started_at",
    "api",
    "model",
    "connection_id",
    "provider",
    "upstream_model",
)
UNRECORDED = "unrecorded"
"""The outcome of a request a crash cut off in flight: billed, perhaps, but never recorded."""
# Each open reservation as a ledger row costing its whole amount. A journal from before
# reservations named their request gives the row a name of its own.
_UNRECORDED_ROWS = f"""
INSERT OR IGNORE INTO main.requests (
    request_id, started_at, client_key, api, requested_model, resolved_model, provider,
    connection_id, upstream_model, outcome, status, stream, latency_ms, input_tokens,
    output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, attempts, rung,
    cost_usd
)
SELECT COALESCE(request_id, 'unrecorded-' || id), COALESCE(started_at, expires_at),
    client_key, COALESCE(api, 'unknown'), COALESCE(model, 'unknown'), COALESCE(model, 'unknown'),
    provider, connection_id, upstream_model, '{UNRECORDED}', 0, 0, 0, 0, 0, 0, 0, 0, '[]', rung,
    amount
FROM journal.reservations
"""
_RUNGS = {rung.label: rung for rung in Rung}


def journal_path(ledger: Path, worker: int = 0) -> Path:
    """Where the journal of the ledger at `ledger` lives: `<ledger>.journal` for the
    first worker, `<ledger>.w<k>.journal` for worker k of `serve --workers`."""
    if worker == 0:
        return ledger.with_name(ledger.name + ".journal")
    return ledger.with_name(f"{ledger.name}.w{worker}.journal")


def worker_journals(ledger: Path) -> dict[int, Path]:
    """The journals of the ledger at `ledger` that workers past the first left, by worker."""
    found = {}
    for path in ledger.parent.glob(f"{ledger.name}.w*.journal"):
        number = path.name.removeprefix(f"{ledger.name}.w").removesuffix(".journal")
        if number.isdigit():
            found[int(number)] = path
    return found


class MoneyJournal:
    """Open reservations and not-yet-batched settled rows of one ledger, committed at once."""

    def __init__(self, ledger: sqlite3.Connection, path: Path) -> None:
        """Open the journal at `path`, replaying into `ledger` what the last run left."""
        self.path = path
        self._recover(ledger)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=5000")
        use_wal(self._db)
        self._db.execute("PRAGMA synchronous=OFF")
        self._committed: deque[str] = deque()
        columns = len(ledger.execute("PRAGMA table_info(requests)").fetchall())
        self._insert_settled = f"INSERT INTO settled VALUES ({', '.join('?' * columns)})"

    def opened(self, reservation: Reservation) -> None:
        """Write down a reservation before its attempt is sent."""
        held_for = reservation.held_for
        self._db.execute(
            "INSERT OR REPLACE INTO reservations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                reservation.id,
                reservation.rung.label,
                reservation.client_key,
                reservation.amount,
                reservation.expires_at,
                *(
                    (None,) * len(_HELD_FOR_COLUMNS)
                    if held_for is None
                    else (
                        held_for.request_id,
                        held_for.started_at,
                        held_for.api,
                        held_for.model,
                        held_for.connection_id,
                        held_for.provider,
                        held_for.upstream_model,
                    )
                ),
            ),
        )

    def closed(self, reservation_id: int) -> None:
        """Strike out a reservation that was given back or has expired."""
        self._db.execute("DELETE FROM reservations WHERE id = ?", (reservation_id,))

    def settled(self, reservation_id: int | None, row: tuple[Any, ...]) -> None:
        """Replace a reservation with its request's ledger row, in one commit."""
        db = self._db
        db.execute("BEGIN")
        try:
            self._forget_committed()
            if reservation_id is not None:
                db.execute("DELETE FROM reservations WHERE id = ?", (reservation_id,))
            db.execute(self._insert_settled, row)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def committed(self, request_ids: Iterable[str]) -> None:
        """The ledger has committed these rows; their copies go with the next settle.

        Called from the ledger writer's thread: it only queues the ids."""
        self._committed.extend(request_ids)

    def open_reservations(self) -> list[Reservation]:
        """The reservations written down and not yet struck out (none at start: the last
        run's became `unrecorded` ledger rows)."""
        rows = self._db.execute(
            "SELECT id, rung, client_key, amount, expires_at FROM reservations"
        ).fetchall()
        return [
            Reservation(id, _RUNGS[rung], client_key, amount, expires_at)
            for id, rung, client_key, amount, expires_at in rows
            if rung in _RUNGS
        ]

    def close(self) -> None:
        """Delete the copies of committed rows and close the journal's connection."""
        self._forget_committed()
        self._db.close()

    def _forget_committed(self) -> None:
        committed = self._committed
        if committed:
            ids = [(committed.popleft(),) for _ in range(len(committed))]
            self._db.executemany("DELETE FROM settled WHERE request_id = ?", ids)

    def _recover(self, ledger: sqlite3.Connection) -> None:
        ledger.execute("ATTACH DATABASE ? AS journal", (str(self.path),))
        try:
            use_wal(ledger, "journal")
            # One write transaction: a process that opens the same journal at once finds
            # it as the last run left it or wholly recovered, never half-way.
            ledger.execute("BEGIN IMMEDIATE")
            try:
                _replay(ledger)
            except BaseException:
                ledger.execute("ROLLBACK")
                raise
            ledger.execute("COMMIT")
        finally:
            ledger.execute("DETACH DATABASE journal")


def _replay(ledger: sqlite3.Connection) -> None:
    """Move what the attached journal holds into the ledger, inside the caller's
    transaction, and leave the journal empty in today's schema."""
    ledger.execute(_SCHEMA.replace("EXISTS ", "EXISTS journal."))
    held = {row[1] for row in ledger.execute("PRAGMA journal.table_info(reservations)")}
    for column in _HELD_FOR_COLUMNS:
        if column not in held:  # a journal written before reservations named requests
            kind = "REAL" if column == "started_at" else "TEXT"
            ledger.execute(f"ALTER TABLE journal.reservations ADD COLUMN {column} {kind}")
    ledger.execute(_UNRECORDED_ROWS)
    ledger.execute("DELETE FROM journal.reservations")
    # The settled table mirrors the ledger's columns as they are now: rows left by the
    # last run are copied by name, then the table is made again from today's schema.
    left = {row[1] for row in ledger.execute("PRAGMA journal.table_info(settled)")}
    if left:
        now = [row[1] for row in ledger.execute("PRAGMA main.table_info(requests)")]
        names = ", ".join(name for name in now if name in left)
        ledger.execute(
            f"INSERT OR IGNORE INTO main.requests ({names}) SELECT {names} FROM journal.settled"
        )
        ledger.execute("DROP TABLE journal.settled")
    ledger.execute("CREATE TABLE journal.settled AS SELECT * FROM main.requests WHERE 0")
