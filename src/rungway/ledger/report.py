"""Spend reports: the ledger's requests, tokens and costs over a period, grouped one way.

Savings are what the plans and free rungs saved: list price minus incremental cost, over
the rows whose list price is known. A row without a list price still counts its requests,
tokens and incremental cost, and is counted in `unpriced_requests`. A request a crash cut
off in flight (outcome `unrecorded`) costs its ceiling and is counted in
`unrecorded_requests` and `unrecorded_usd`, not as unpriced. The cache-hit share is the
input read from a prompt cache over all input (cache reads and writes included), None for
a group with no input.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from rungway.engine.record import RequestRecord
from rungway.ledger.journal import UNRECORDED
from rungway.routing.rungs import Rung

Dimension = Literal["rung", "connection", "key", "model"]
DIMENSIONS: tuple[Dimension, ...] = get_args(Dimension)
NO_RUNG = "none"
NO_CONNECTION = "none"
NO_KEY = "(no key)"

# The SQL expression of each grouping; each matches `_group_of` below.
GROUP_SQL: dict[Dimension, str] = {
    "rung": f"COALESCE(rung, '{NO_RUNG}')",
    "connection": f"COALESCE(connection_id, '{NO_CONNECTION}')",
    "key": f"COALESCE(client_key, '{NO_KEY}')",
    "model": "COALESCE(upstream_model, resolved_model)",
}
_RUNG_ORDER = {rung.label: int(rung) for rung in Rung}


class LedgerUnavailable(Exception):
    """A shared ledger did not answer a read; the message names it and why."""


@dataclass(frozen=True, slots=True)
class SpendRow:
    """The requests of one group: how many, their tokens and what they cost."""

    group: str
    requests: int = 0
    input_tokens: int = 0
    """Input including cache reads and writes."""
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    """Incremental cost: what the requests added to the bill."""
    list_cost_usd: float = 0.0
    """The same tokens at list price, over the rows whose list price is known."""
    savings_usd: float = 0.0
    """List price minus incremental cost, over the rows whose list price is known."""
    unpriced_requests: int = 0
    """Requests whose model has no list price: left out of list cost and savings."""
    unrecorded_requests: int = 0
    """Requests in flight at a crash: perhaps billed, never recorded, counted at ceiling."""
    unrecorded_usd: float = 0.0
    """What those requests count for in `cost_usd`: their ceilings."""
    cache_read_tokens: int = 0
    """Of `input_tokens`, those read from a provider's prompt cache."""

    @property
    def cache_hit_share(self) -> float | None:
        """Cache-read input over all input, 0..1; None when the group had no input."""
        if self.input_tokens <= 0:
            return None
        return self.cache_read_tokens / self.input_tokens

    def plus(self, other: SpendRow, group: str) -> SpendRow:
        """This row and `other` added together, under `group`."""
        return SpendRow(
            group,
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cost_usd + other.cost_usd,
            self.list_cost_usd + other.list_cost_usd,
            self.savings_usd + other.savings_usd,
            self.unpriced_requests + other.unpriced_requests,
            self.unrecorded_requests + other.unrecorded_requests,
            self.unrecorded_usd + other.unrecorded_usd,
            self.cache_read_tokens + other.cache_read_tokens,
        )


@dataclass(frozen=True, slots=True)
class SpendReport:
    """The ledger's spend from `since` (inclusive) to `until` (exclusive), grouped by `by`."""

    since: float
    until: float
    by: Dimension
    rows: tuple[SpendRow, ...]

    @property
    def total(self) -> SpendRow:
        """Every row added together."""
        total = SpendRow("total")
        for row in self.rows:
            total = total.plus(row, "total")
        return total

    def row(self, group: str) -> SpendRow:
        """The row of `group`, or an empty one when the period holds none."""
        return next((row for row in self.rows if row.group == group), SpendRow(group))


def spend_report(path: Path, *, since: float, until: float, by: Dimension) -> SpendReport:
    """Aggregate the SQLite ledger at `path` with one GROUP BY query."""
    if not path.exists():
        return SpendReport(since, until, by, ())
    query = (
        f"SELECT {GROUP_SQL[by]} AS grp, COUNT(*), "
        "SUM(input_tokens + cache_read_tokens + cache_write_tokens), "
        "SUM(output_tokens), SUM(reasoning_tokens), TOTAL(cost_usd), TOTAL(list_cost_usd), "
        # TOTAL skips NULLs, so rows without a list price add nothing to the savings.
        "TOTAL(list_cost_usd - cost_usd), "
        f"SUM(list_cost_usd IS NULL AND outcome != '{UNRECORDED}'), "
        f"SUM(outcome = '{UNRECORDED}'), TOTAL(CASE WHEN outcome = '{UNRECORDED}' "
        "THEN cost_usd END), SUM(cache_read_tokens) "
        "FROM requests WHERE started_at >= ? AND started_at < ? GROUP BY grp"
    )
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found = db.execute(query, (since, until)).fetchall()
    finally:
        db.close()
    rows = [
        SpendRow(
            str(group),
            int(n),
            int(tin),
            int(tout),
            int(reason),
            cost,
            listed,
            saved,
            int(unpriced),
            int(lost),
            held,
            int(read),
        )
        for group, n, tin, tout, reason, cost, listed, saved, unpriced, lost, held, read in found
    ]
    return SpendReport(since, until, by, ordered_rows(rows, by))


def spend_report_of(
    records: Iterable[RequestRecord], *, since: float, until: float, by: Dimension
) -> SpendReport:
    """The same aggregation over in-memory records."""
    groups: dict[str, SpendRow] = {}
    for record in records:
        if not since <= record.started_at < until:
            continue
        group = _group_of(record, by)
        usage = record.usage
        listed = record.list_cost_usd
        one = SpendRow(
            group,
            1,
            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            usage.output_tokens,
            usage.reasoning_tokens,
            record.cost_usd,
            listed or 0.0,
            listed - record.cost_usd if listed is not None else 0.0,
            int(listed is None and record.outcome != UNRECORDED),
            int(record.outcome == UNRECORDED),
            record.cost_usd if record.outcome == UNRECORDED else 0.0,
            usage.cache_read_tokens,
        )
        groups[group] = groups[group].plus(one, group) if group in groups else one
    return SpendReport(since, until, by, ordered_rows(groups.values(), by))


def _group_of(record: RequestRecord, by: Dimension) -> str:
    if by == "rung":
        return record.rung or NO_RUNG
    if by == "connection":
        return record.connection_id or NO_CONNECTION
    if by == "key":
        return record.client_key or NO_KEY
    return record.upstream_model or record.resolved_model


def ordered_rows(rows: Iterable[SpendRow], by: Dimension) -> tuple[SpendRow, ...]:
    """The rows in the order reports show them."""
    if by == "rung":
        # The ladder's own order reads best; rows without a rung come last.
        return tuple(sorted(rows, key=lambda row: (_RUNG_ORDER.get(row.group, 99), row.group)))
    return tuple(
        sorted(rows, key=lambda row: (-row.cost_usd, -row.list_cost_usd, -row.requests, row.group))
    )
