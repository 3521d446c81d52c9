"""The embedded request ledger: SQLite in WAL mode, written off the request path.

Requests hand their rows to a queue; one writer thread commits them in batches, so a
request never waits for the disk. Reads open their own connection (WAL lets them run
beside the writer).
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from rungway.budget.local import Grouping, Reservation
from rungway.engine.record import RequestRecord
from rungway.ledger.journal import MoneyJournal, journal_path
from rungway.ledger.outbox import prepare_outbox
from rungway.ledger.repair import repaired
from rungway.ledger.report import Dimension, LedgerUnavailable, SpendReport, spend_report
from rungway.ledger.wal import use_wal

SCHEMA_VERSION = 3
_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    client_key TEXT,
    api TEXT NOT NULL,
    requested_model TEXT NOT NULL,
    resolved_model TEXT NOT NULL,
    provider TEXT,
    connection_id TEXT,
    upstream_model TEXT,
    outcome TEXT NOT NULL,
    status INTEGER NOT NULL,
    stream INTEGER NOT NULL,
    latency_ms REAL NOT NULL,
    ttfb_ms REAL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    attempts TEXT NOT NULL,
    rung TEXT,
    plan BLOB,
    cost_usd REAL NOT NULL DEFAULT 0,
    list_cost_usd REAL
);
CREATE INDEX IF NOT EXISTS requests_started_at ON requests (started_at);
"""
_INSERT = (
    "INSERT OR REPLACE INTO requests VALUES "
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_MIGRATIONS = {
    # version reached -> statements that reach it from the one before
    2: ("ALTER TABLE requests ADD COLUMN rung TEXT", "ALTER TABLE requests ADD COLUMN plan BLOB"),
    3: (
        "ALTER TABLE requests ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0",
        "ALTER TABLE requests ADD COLUMN list_cost_usd REAL",
    ),
}
_SUMMARY_COLUMNS = (
    "request_id, started_at, client_key, api, requested_model, resolved_model, provider, "
    "connection_id, upstream_model, outcome, status, stream, latency_ms, ttfb_ms, "
    "input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, "
    "attempts, rung, cost_usd, list_cost_usd"
)
"""Every column but the route plan, which only a single row's read needs."""
_BATCH = 512
_GATHER_S = 0.05
_CHECK_S = 0.5
"""How often a flush that waits looks whether the writer is still there."""
log = logging.getLogger("rungway.ledger")
_STOP = object()


def connect(path: Path) -> sqlite3.Connection:
    """Open the ledger database at `path`, creating it (and its folder) when needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
    use_wal(db)
    db.execute("PRAGMA synchronous=NORMAL")
    _migrate(db)
    return db


def _migrate(db: sqlite3.Connection) -> None:
    """Bring the ledger's schema to SCHEMA_VERSION, in one write transaction.

    The workers of `serve --workers` open a new ledger at once: each must find either no
    table or the whole schema at its version, never a table another has just made whose
    version is not yet written, which it would then try to migrate again.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        exists = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'requests'").fetchone()
        if exists:
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS.get(target, ()):
                    db.execute(statement)
        # One statement at a time: `executescript` would commit the transaction first.
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


class SqliteLedger:
    """Records requests to SQLite from a background thread, money first to its journal.

    It is also the budget's `ReservationLog`: reservations go to the journal at once. With
    `outbox`, every row it gains also waits in its outbox for PostgreSQL (`outbox.py`).
    """

    def __init__(self, path: Path, *, worker: int = 0, outbox: bool = False) -> None:
        self.path = path
        self._db = connect(path)
        # Before the journal's recovery, so the rows it restores reach the outbox too.
        prepare_outbox(self._db, enabled=outbox)
        # Each worker of `serve --workers` has a journal of its own, so none replays a
        # sibling's open reservations as crashed.
        self.journal = MoneyJournal(self._db, journal_path(path, worker))
        self._columns = [row[1] for row in self._db.execute("PRAGMA table_info(requests)")]
        self._queue: queue.Queue[object] = queue.Queue()
        self.writer_failure: str | None = None
        """Why the writer thread stopped, if it did: no row is written after it."""
        self._thread = threading.Thread(target=self._write_forever, name="ledger", daemon=True)
        self._thread.start()

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        """Queue `row` for writing; a row that settles a reservation or costs money is
        first committed to the journal, in the same write that strikes out the reservation."""
        # The tuple is built here, on the caller's thread, so that the writer thread runs
        # little Python and holds the interpreter lock as briefly as possible.
        values = _row(row)
        journaled = settles is not None or row.cost_usd > 0
        if journaled:
            reservation_id = settles.id if settles is not None else None
            try:
                self.journal.settled(reservation_id, values)
            except (OverflowError, ValueError, TypeError, sqlite3.ProgrammingError):
                # A value SQLite cannot store: the row goes on made storable and flagged.
                log.exception("ledger: row %s is repaired to be written", row.request_id)
                values = repaired(values, self._columns)
                self.journal.settled(reservation_id, values)
        self._queue.put_nowait((values, journaled))

    def opened(self, reservation: Reservation) -> None:
        """Write a reservation down before its attempt is sent."""
        self.journal.opened(reservation)

    def closed(self, reservation_id: int) -> None:
        """Strike out a reservation that was given back or has expired."""
        self.journal.closed(reservation_id)

    def spent_since(self, since: float, by: Grouping = "rung") -> dict[str, float]:
        """Incremental cost per rung (or per client key) of the requests since `since`."""
        try:
            self.flush()
        except LedgerUnavailable:
            # A budget seeded on the request path must not fail it: what is on disk is
            # the best there is, and /healthz already says the writer has stopped.
            log.warning("ledger: budgets seeded from %s without the rows still queued", self.path)
        return spent_since(self.path, since, by)

    def spend_report(self, since: float, until: float, by: Dimension) -> SpendReport:
        """Requests, tokens and costs from `since` to `until`, grouped by `by`."""
        self.flush()
        return spend_report(self.path, since=since, until=until, by=by)

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` rows, newest first, without their route plans."""
        self.flush()
        return read_recent(self.path, limit)

    def matching(self, prefix: str, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` rows whose id starts with `prefix`, oldest first, with plans."""
        self.flush()
        return read_matching(self.path, prefix, limit)

    def flush(self) -> None:
        """Wait until every queued row is committed; raise LedgerUnavailable at once if the
        writer has stopped, since they never will be."""
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks and self._writing():
                done.wait(_CHECK_S)
        if not self._writing():
            raise LedgerUnavailable(self.stopped_writer() or "the ledger writer has stopped")

    def stopped_writer(self) -> str | None:
        """What stopped the writer thread, or None while it writes."""
        if self._writing():
            return None
        return (
            f"the ledger writer has stopped ({self.writer_failure or 'its thread exited'}); "
            "no request is recorded until the gateway restarts"
        )

    def close(self) -> None:
        """Commit what is queued and stop the writer."""
        self._queue.put(_STOP)
        self._thread.join()
        self._db.close()
        self.journal.close()

    def _writing(self) -> bool:
        return self.writer_failure is None and self._thread.is_alive()

    def _write_forever(self) -> None:
        try:
            self._write_batches()
        except BaseException as error:
            # Nothing a row holds gets here; if anything does, say so where it is seen.
            self.writer_failure = f"{type(error).__name__}: {error}"
            log.critical("ledger: the writer thread has stopped", exc_info=True)
            with self._queue.all_tasks_done:
                self._queue.all_tasks_done.notify_all()

    def _write_batches(self) -> None:
        while True:
            batch = [self._queue.get()]
            # Gather what arrives in the next moment into the same transaction: one commit
            # per batch instead of per row keeps the writer from competing with requests.
            if batch[0] is not _STOP:
                time.sleep(_GATHER_S)
            while len(batch) < _BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            queued = [item for item in batch if isinstance(item, tuple)]
            rows = [values for values, _ in queued]
            try:
                if rows:
                    self._insert(rows)
                    # Committed: the journal's copies of these rows are no longer needed.
                    self.journal.committed(values[0] for values, kept in queued if kept)
            except sqlite3.OperationalError:
                # A full disk or a locked file must not stop the writer: later rows may fit.
                log.exception("ledger: could not write %d rows to %s", len(rows), self.path)
            except Exception:
                # Some row holds what SQLite cannot store: the others go in one by one.
                self._write_each(queued)
            finally:
                for _ in batch:
                    self._queue.task_done()
            if any(item is _STOP for item in batch):
                return

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(_INSERT, rows)

    def _write_each(self, queued: list[tuple[tuple[Any, ...], bool]]) -> None:
        """Write a batch that failed row by row, each row that fails made storable."""
        for values, kept in queued:
            try:
                self._insert([values])
            except sqlite3.OperationalError:
                log.exception("ledger: could not write row %s to %s", values[0], self.path)
                continue
            except Exception:
                log.exception("ledger: row %s is repaired to be written", values[0])
                try:
                    self._insert([repaired(values, self._columns)])
                except Exception:
                    log.exception("ledger: could not write row %s to %s", values[0], self.path)
                    continue
            if kept:
                self.journal.committed((values[0],))


def _row(record: RequestRecord) -> tuple[Any, ...]:
    usage = record.usage
    attempts = [
        {
            "connection_id": attempt.connection_id,
            "outcome": attempt.outcome,
            "status": attempt.status,
            "latency_ms": attempt.latency_ms,
            "detail": attempt.detail,
        }
        for attempt in record.attempts
    ]
    return (
        record.request_id,
        record.started_at,
        record.client_key,
        record.api,
        record.requested_model,
        record.resolved_model,
        record.provider,
        record.connection_id,
        record.upstream_model,
        record.outcome,
        record.status,
        int(record.stream),
        record.latency_ms,
        record.ttfb_ms,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
        orjson.dumps(attempts).decode(),
        record.rung,
        record.plan,
        record.cost_usd,
        record.list_cost_usd,
    )


def read_rows(path: Path, limit: int = 100) -> list[dict[str, Any]]:
    """The newest `limit` rows, as dictionaries (attempts decoded)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute(
            "SELECT * FROM requests ORDER BY started_at DESC LIMIT ?", (limit,)
        ).fetchall()
    finally:
        db.close()
    return [_decoded(row) for row in rows]


def read_recent(path: Path, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` rows without their route plans (attempts decoded): a light list."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        rows = db.execute(
            f"SELECT {_SUMMARY_COLUMNS} FROM requests ORDER BY started_at DESC LIMIT ?", (limit,)
        ).fetchall()
    finally:
        db.close()
    return [{**dict(row), "attempts": orjson.loads(row["attempts"])} for row in rows]


def spent_since(path: Path, since: float, by: Grouping = "rung") -> dict[str, float]:
    """Incremental cost per rung (or per client key) of the requests since `since`."""
    if not path.exists():
        return {}
    column = {"rung": "rung", "key": "client_key"}[by]
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            f"SELECT {column}, SUM(cost_usd) FROM requests "
            f"WHERE started_at >= ? AND {column} IS NOT NULL GROUP BY {column}",
            (since,),
        ).fetchall()
    finally:
        db.close()
    return {rung: float(total) for rung, total in rows}


def read_matching(path: Path, prefix: str, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` rows whose request id starts with `prefix`, in id order, with plans."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        # A range over the primary key, so the lookup is an index seek: ids are ASCII
        # letters and digits, all below "~".
        rows = db.execute(
            "SELECT * FROM requests WHERE request_id >= ? AND request_id < ? "
            "ORDER BY request_id LIMIT ?",
            (prefix, prefix + "~", limit),
        ).fetchall()
    finally:
        db.close()
    return [_decoded(row) for row in rows]


def _decoded(row: sqlite3.Row) -> dict[str, Any]:
    plan = row["plan"]
    return {
        **dict(row),
        "attempts": orjson.loads(row["attempts"]),
        "plan": orjson.loads(plan) if plan else None,
    }
