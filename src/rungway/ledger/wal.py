"""Putting a SQLite file in WAL mode while other processes may be opening it too."""

from __future__ import annotations

import sqlite3
import time

_WAIT_S = 5.0
_PAUSE_S = 0.005


def use_wal(db: sqlite3.Connection, schema: str = "main") -> None:
    """Put `schema`'s file in WAL mode, waiting for other processes that do the same.

    Switching a new file to WAL needs it to itself for a moment. SQLite answers "database
    is locked" at once, without its busy wait, to a connection that asks while another
    holds the file (it could deadlock otherwise), so the workers of `serve --workers`
    that open a new ledger together would fail here: each tries again for a while.
    """
    deadline = time.monotonic() + _WAIT_S
    while True:
        try:
            db.execute(f"PRAGMA {schema}.journal_mode=WAL")
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(_PAUSE_S)
        else:
            return
