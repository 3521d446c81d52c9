"""An in-memory ledger for tests and embedding."""

from __future__ import annotations

import threading

from rungway.budget.local import Grouping, Reservation
from rungway.engine.record import RequestRecord
from rungway.ledger.report import Dimension, SpendReport, spend_report_of


class MemoryLedger:
    """Keeps every recorded row in a list."""

    def __init__(self) -> None:
        self.rows: list[RequestRecord] = []
        self._lock = threading.Lock()

    def record(self, row: RequestRecord, settles: Reservation | None = None) -> None:
        """Append `row`."""
        with self._lock:
            self.rows.append(row)

    def spent_since(self, since: float, by: Grouping = "rung") -> dict[str, float]:
        """Incremental cost per rung (or per client key) of the rows since `since`."""
        totals: dict[str, float] = {}
        with self._lock:
            for row in self.rows:
                name = row.rung if by == "rung" else row.client_key
                if name is not None and row.started_at >= since:
                    totals[name] = totals.get(name, 0.0) + row.cost_usd
        return totals

    def spend_report(self, since: float, until: float, by: Dimension) -> SpendReport:
        """Requests, tokens and costs from `since` to `until`, grouped by `by`."""
        with self._lock:
            rows = list(self.rows)
        return spend_report_of(rows, since=since, until=until, by=by)

    def flush(self) -> None:
        """Nothing is queued: rows are visible at once."""

    def close(self) -> None:
        """Nothing to release."""
