"""An in-memory ledger for tests and embedding."""

from __future__ import annotations

import threading
from typing import Any

import orjson

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

    def recent(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` rows, newest first, without their route plans."""
        with self._lock:
            rows = sorted(self.rows, key=lambda row: row.started_at, reverse=True)[:limit]
        return [_as_dict(row, plan=False) for row in rows]

    def matching(self, prefix: str, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` rows whose id starts with `prefix`, oldest first, with plans."""
        with self._lock:
            found = [row for row in self.rows if row.request_id.startswith(prefix)]
        found.sort(key=lambda row: row.request_id)
        return [_as_dict(row, plan=True) for row in found[:limit]]

    def flush(self) -> None:
        """Nothing is queued: rows are visible at once."""

    def stopped_writer(self) -> str | None:
        """None: rows are kept by the caller's thread, which has no writer to lose."""
        return None

    def close(self) -> None:
        """Nothing to release."""


def _as_dict(row: RequestRecord, *, plan: bool) -> dict[str, Any]:
    # The same keys and value types as a row read back from the SQLite ledger.
    usage = row.usage
    read: dict[str, Any] = {
        "request_id": row.request_id,
        "started_at": row.started_at,
        "client_key": row.client_key,
        "api": row.api,
        "requested_model": row.requested_model,
        "resolved_model": row.resolved_model,
        "provider": row.provider,
        "connection_id": row.connection_id,
        "upstream_model": row.upstream_model,
        "outcome": row.outcome,
        "status": row.status,
        "stream": int(row.stream),
        "latency_ms": row.latency_ms,
        "ttfb_ms": row.ttfb_ms,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "attempts": [
            {
                "connection_id": attempt.connection_id,
                "outcome": attempt.outcome,
                "status": attempt.status,
                "latency_ms": attempt.latency_ms,
                "detail": attempt.detail,
            }
            for attempt in row.attempts
        ],
        "rung": row.rung,
        "cost_usd": row.cost_usd,
        "list_cost_usd": row.list_cost_usd,
    }
    if plan:
        read["plan"] = orjson.loads(row.plan) if row.plan else None
    return read
