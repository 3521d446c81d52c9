"""The ledger's reads from PostgreSQL: the same reports and rows as from SQLite.

Each function runs one query on an asyncpg connection and answers exactly what its SQLite
twin in `sqlite.py` or `report.py` answers, keys and value types included (the stream flag
as 0/1, attempts and plans decoded), so the admin API, the dashboard and the CLI cannot
tell which ledger they read.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg
import orjson

from rungway.budget.local import Grouping
from rungway.ledger.journal import UNRECORDED
from rungway.ledger.pg_schema import COLUMNS, quoted
from rungway.ledger.report import GROUP_SQL, Dimension, SpendReport, SpendRow, ordered_rows

Read = Callable[[asyncpg.Connection], Coroutine[Any, Any, Any]]
_SUMMARY = ", ".join(name for name in COLUMNS if name != "plan")
_ALL = ", ".join(COLUMNS)


async def spend_report(
    connection: asyncpg.Connection, schema: str, since: float, until: float, by: Dimension
) -> SpendReport:
    """Requests, tokens and costs from `since` to `until`, grouped by `by`, in one query."""
    found = await connection.fetch(
        f"SELECT {GROUP_SQL[by]} AS grp, COUNT(*), "
        "COALESCE(SUM(input_tokens + cache_read_tokens + cache_write_tokens), 0), "
        "COALESCE(SUM(output_tokens), 0), COALESCE(SUM(reasoning_tokens), 0), "
        "COALESCE(SUM(cost_usd), 0), COALESCE(SUM(list_cost_usd), 0), "
        # SUM skips NULLs, so rows without a list price add nothing to the savings.
        "COALESCE(SUM(list_cost_usd - cost_usd), 0), "
        f"COUNT(*) FILTER (WHERE list_cost_usd IS NULL AND outcome <> '{UNRECORDED}'), "
        f"COUNT(*) FILTER (WHERE outcome = '{UNRECORDED}'), "
        f"COALESCE(SUM(cost_usd) FILTER (WHERE outcome = '{UNRECORDED}'), 0), "
        "COALESCE(SUM(cache_read_tokens), 0) "
        f"FROM {quoted(schema)}.requests WHERE started_at >= $1 AND started_at < $2 GROUP BY grp",
        since,
        until,
    )
    rows = [
        SpendRow(
            str(record[0]),
            int(record[1]),
            int(record[2]),
            int(record[3]),
            int(record[4]),
            float(record[5]),
            float(record[6]),
            float(record[7]),
            int(record[8]),
            int(record[9]),
            float(record[10]),
            int(record[11]),
        )
        for record in found
    ]
    return SpendReport(since, until, by, ordered_rows(rows, by))


async def spent_since(
    connection: asyncpg.Connection, schema: str, since: float, by: Grouping
) -> dict[str, float]:
    """Incremental cost per rung (or per client key) of the requests since `since`."""
    column = {"rung": "rung", "key": "client_key"}[by]
    found = await connection.fetch(
        f"SELECT {column}, SUM(cost_usd) FROM {quoted(schema)}.requests "
        f"WHERE started_at >= $1 AND {column} IS NOT NULL GROUP BY {column}",
        since,
    )
    return {record[0]: float(record[1]) for record in found}


async def recent(connection: asyncpg.Connection, schema: str, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` rows, newest first, without their route plans."""
    found = await connection.fetch(
        f"SELECT {_SUMMARY} FROM {quoted(schema)}.requests ORDER BY started_at DESC LIMIT $1",
        limit,
    )
    return [_decoded(record) for record in found]


async def matching(
    connection: asyncpg.Connection, schema: str, prefix: str, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` rows whose request id starts with `prefix`, in id order, with plans."""
    # A range over the primary key (collated "C"), so the lookup is an index seek: ids are
    # ASCII letters and digits, all below "~".
    found = await connection.fetch(
        f"SELECT {_ALL} FROM {quoted(schema)}.requests "
        "WHERE request_id >= $1 AND request_id < $2 ORDER BY request_id LIMIT $3",
        prefix,
        prefix + "~",
        limit,
    )
    return [_decoded(record) for record in found]


def _decoded(record: asyncpg.Record) -> dict[str, Any]:
    row = dict(record)
    row["stream"] = int(row["stream"])
    row["attempts"] = orjson.loads(row["attempts"])
    if "plan" in row:
        plan = row["plan"]
        row["plan"] = orjson.loads(plan) if plan else None
    return row
