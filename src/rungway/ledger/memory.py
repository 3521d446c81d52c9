"""An in-memory ledger for tests and embedding."""

from __future__ import annotations

import threading

from rungway.engine.record import RequestRecord


class MemoryLedger:
    """Keeps every recorded row in a list."""

    def __init__(self) -> None:
        self.rows: list[RequestRecord] = []
        self._lock = threading.Lock()

    def record(self, row: RequestRecord) -> None:
        """Append `row`."""
        with self._lock:
            self.rows.append(row)

    def spent_since(self, since: float) -> dict[str, float]:
        """Incremental cost per rung of the rows started at or after `since`."""
        totals: dict[str, float] = {}
        with self._lock:
            for row in self.rows:
                if row.rung is not None and row.started_at >= since:
                    totals[row.rung] = totals.get(row.rung, 0.0) + row.cost_usd
        return totals

    def flush(self) -> None:
        """Nothing is queued: rows are visible at once."""

    def close(self) -> None:
        """Nothing to release."""
