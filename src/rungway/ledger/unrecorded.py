"""The rows crashes left in a ledger: requests in flight when their process died.

A shared budget store counts each one's cost once (by request id) when the process that
left it starts again, and marks them counted when it seeds a period from the ledger.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from rungway.budget.local import UnrecordedCost
from rungway.ledger.journal import UNRECORDED


def unrecorded_since(path: Path, since: float) -> list[UnrecordedCost]:
    """The `unrecorded` rows of the ledger at `path` that started at `since` or later."""
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT request_id, rung, client_key, cost_usd, started_at FROM requests "
            "WHERE outcome = ? AND started_at >= ?",
            (UNRECORDED, since),
        ).fetchall()
    finally:
        db.close()
    return [UnrecordedCost(*row) for row in rows]
