"""The embedded state store: the quota board's state in a SQLite file beside the ledger.

`save` puts the change on a queue and returns; a writer thread gathers what arrives in
the next moment, keeps each connection's last state, and commits them in one transaction,
so a request never waits for the disk. The file is read once, when the store opens.

A file that cannot be read (not a database, a row that does not decode) never stops the
gateway: the store moves a damaged file aside, says so in a warning, and starts clean. A
`kill -9` loses at most the last moment's changes.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rungway.quota.encoding import UNREADABLE, decode_saved, encode_saved
from rungway.quota.store import MemoryStateStore, SavedConnection, StateStore

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS connections (
    connection_id TEXT PRIMARY KEY,
    state BLOB NOT NULL
);
"""
_GATHER_S = 0.05
log = logging.getLogger("rungway.quota")
_STOP = object()


def state_path(ledger: Path) -> Path:
    """Where the live state of the gateway whose ledger is at `ledger` is kept."""
    return ledger.with_name(ledger.name + ".state")


def open_state_store(path: Path, *, expected: bool) -> StateStore:
    """The embedded store at `path`, or an empty one in memory when no file can be opened.

    `expected` says a previous run should have left the file: its absence is then warned of.
    """
    clean = "starting with no saved quota state"
    if expected and not path.exists():
        log.warning("state: %s is missing; %s", path, clean)
    try:
        return SqliteStateStore(path)
    except (sqlite3.Error, OSError) as error:
        log.warning("state: %s cannot be read (%s); %s", path, error, clean)
    try:
        path.replace(path.with_name(path.name + ".damaged"))
        return SqliteStateStore(path)
    except (sqlite3.Error, OSError) as error:
        log.warning("state: %s cannot be written (%s); quota state is kept in memory", path, error)
        return MemoryStateStore()


class SqliteStateStore:
    """The quota board's state in SQLite, written by a background thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=5000")
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            rows = db.execute("SELECT connection_id, state FROM connections").fetchall()
        except BaseException:
            db.close()
            raise
        self._db = db
        self._loaded = _decoded(rows, path)
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write_forever, name="state", daemon=True)
        self._thread.start()

    def load(self) -> Mapping[str, SavedConnection]:
        """What the file held when the store opened."""
        return self._loaded

    def save(self, connection_id: str, saved: SavedConnection | None) -> None:
        """Queue one connection's state for writing."""
        self._queue.put((connection_id, saved))

    def flush(self) -> None:
        """Wait until every queued change is committed."""
        done = threading.Event()
        self._queue.put(done)
        done.wait()

    def close(self) -> None:
        """Commit what is queued and stop the writer."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        self._db.close()

    def _write_forever(self) -> None:
        while True:
            batch = [self._queue.get()]
            # Changes come in bursts (one per answer from a plan): one commit per moment.
            if batch[0] is not _STOP:
                time.sleep(_GATHER_S)
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            latest: dict[str, SavedConnection | None] = {}
            for item in batch:
                if isinstance(item, tuple):
                    latest[item[0]] = item[1]
            try:
                if latest:
                    self._write(latest)
            except (sqlite3.Error, TypeError, ValueError):
                # A full disk must not stop the writer (and with it `flush` and `close`):
                # the next change may fit.
                log.exception("state: could not write %d connections to %s", len(latest), self.path)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if any(item is _STOP for item in batch):
                return

    def _write(self, latest: Mapping[str, SavedConnection | None]) -> None:
        kept = [(cid, encode_saved(saved)) for cid, saved in latest.items() if saved is not None]
        gone = [(cid,) for cid, saved in latest.items() if saved is None]
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO connections VALUES (?, ?)", kept)
            self._db.executemany("DELETE FROM connections WHERE connection_id = ?", gone)


def _decoded(rows: list[Any], path: Path) -> dict[str, SavedConnection]:
    loaded = {}
    for connection_id, blob in rows:
        try:
            loaded[connection_id] = decode_saved(blob)
        except UNREADABLE as error:
            log.warning("state: %s: the state of %r is unreadable (%s)", path, connection_id, error)
    return loaded
