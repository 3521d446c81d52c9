"""How the drain should write a batch of ledger rows into PostgreSQL, measured.

Three shapes of one idempotent insert of 500 rows, each in one transaction:
- `executemany`: `INSERT ... VALUES (...) ON CONFLICT (request_id) DO NOTHING` per row
  (asyncpg pipelines them);
- `copy`: COPY into a temporary table, then one `INSERT ... SELECT ... ON CONFLICT DO
  NOTHING` (what `ledger/drain.py` does);
- `unnest`: one `INSERT ... SELECT * FROM unnest($1::text[], ...) ON CONFLICT DO NOTHING`.

Each shape writes fresh rows in a schema of its own, dropped at the end, and the median
and best time per batch are printed, in milliseconds.

    python bench/pg_ledger_insert.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres]
                                     [--batches 30] [--batch 500]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import orjson

from rungway.ledger.pg_schema import COLUMNS, migrate, quoted

_TYPES = [
    "text",
    "float8",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "int4",
    "bool",
    "float8",
    "float8",
    "int8",
    "int8",
    "int8",
    "int8",
    "int8",
    "json",
    "text",
    "json",
    "float8",
    "float8",
]
Insert = Callable[[asyncpg.Connection, list[tuple[Any, ...]]], Awaitable[None]]


def _row() -> tuple[Any, ...]:
    attempts = [{"connection_id": "c", "outcome": "rate_limit", "status": 429, "detail": "x" * 40}]
    candidate = {"rung": "cheap", "provider": "openai", "model": "m", "connections": ["c"]}
    plan = {"candidates": [candidate] * 3, "skipped": []}
    return (
        secrets.token_hex(8), time.time(), "key", "openai_chat", "m", "m", "openai", "c", "m",
        "ok", 200, True, 12.5, 3.0, 100, 50, 0, 0, 0, orjson.dumps(attempts).decode(), "cheap",
        orjson.dumps(plan).decode(), 0.001, 0.002,
    )  # fmt: skip


def _shapes(schema: str) -> dict[str, Insert]:
    name, columns = quoted(schema), ", ".join(COLUMNS)
    values = ", ".join(f"${n + 1}" for n in range(len(COLUMNS)))
    arrays = ", ".join(f"${n + 1}::{kind}[]" for n, kind in enumerate(_TYPES))
    conflict = "ON CONFLICT (request_id) DO NOTHING"

    async def executemany(connection: asyncpg.Connection, rows: list[tuple[Any, ...]]) -> None:
        async with connection.transaction():
            await connection.executemany(
                f"INSERT INTO {name}.requests ({columns}) VALUES ({values}) {conflict}", rows
            )

    async def copy(connection: asyncpg.Connection, rows: list[tuple[Any, ...]]) -> None:
        async with connection.transaction():
            await connection.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS staged (LIKE {name}.requests) "
                "ON COMMIT DELETE ROWS"
            )
            await connection.copy_records_to_table("staged", records=rows, columns=COLUMNS)
            await connection.execute(
                f"INSERT INTO {name}.requests ({columns}) SELECT {columns} FROM staged {conflict}"
            )

    async def unnest(connection: asyncpg.Connection, rows: list[tuple[Any, ...]]) -> None:
        await connection.execute(
            f"INSERT INTO {name}.requests ({columns}) SELECT * FROM unnest({arrays}) {conflict}",
            *(list(column) for column in zip(*rows, strict=True)),
        )

    return {"executemany": executemany, "copy": copy, "unnest": unnest}


async def main(dsn: str, batches: int, batch: int) -> None:
    """Time each shape, interleaved so drift in the machine's load lands on all alike."""
    schema = f"bench_{secrets.token_hex(4)}"
    connection = await asyncpg.connect(dsn)
    try:
        await migrate(connection, schema)
        shapes = _shapes(schema)
        times: dict[str, list[float]] = {shape: [] for shape in shapes}
        for _ in range(batches):
            for shape, insert in shapes.items():
                rows = [_row() for _ in range(batch)]
                started = time.perf_counter()
                await insert(connection, rows)
                times[shape].append(time.perf_counter() - started)
        print(f"{batch} rows a batch, {batches} batches each")
        for shape, taken in times.items():
            median, best = statistics.median(taken) * 1000, min(taken) * 1000
            print(f"  {shape:<12} median {median:6.2f} ms   best {best:6.2f} ms")
    finally:
        await connection.execute(f"DROP SCHEMA IF EXISTS {quoted(schema)} CASCADE")
        await connection.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch", type=int, default=500)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.dsn, arguments.batches, arguments.batch))
