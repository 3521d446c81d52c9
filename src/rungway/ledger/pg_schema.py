"""The ledger's tables in PostgreSQL and the versioned migrations that make them.

Migrations run in order at start, each once, recorded in `rungway_migrations` in the
configured schema (a name of our own: `schema_migrations` is a common name other tools
use). Every replica runs them as it starts; an advisory lock held for the transaction
keeps two replicas starting at once from applying the same migration twice.

The `requests` table mirrors the SQLite ledger's columns, with the route plan and the
attempts as `json`: kept verbatim, readable with PostgreSQL's JSON operators, and, unlike
`jsonb`, accepting any escape an upstream's error text may hold.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported in `migrate`: every start reads `COLUMNS` (the SQLite ledger's outbox), and
    # asyncpg takes ~20 ms to import.
    import asyncpg

log = logging.getLogger("rungway.ledger")

COLUMNS = (
    "request_id",
    "started_at",
    "client_key",
    "api",
    "requested_model",
    "resolved_model",
    "provider",
    "connection_id",
    "upstream_model",
    "outcome",
    "status",
    "stream",
    "latency_ms",
    "ttfb_ms",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "attempts",
    "rung",
    "plan",
    "cost_usd",
    "list_cost_usd",
)
"""The `requests` columns, in the order rows travel from SQLite to PostgreSQL."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: its version, what it does, and its statements."""

    version: int
    description: str
    statements: tuple[str, ...]
    """Each with `{schema}` where the quoted schema name goes."""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "the requests table, by request id, with an index on started_at",
        (
            # COLLATE "C": ids compare byte by byte, so a prefix is a range over the key.
            """
            CREATE TABLE {schema}.requests (
                request_id text COLLATE "C" PRIMARY KEY,
                started_at double precision NOT NULL,
                client_key text,
                api text NOT NULL,
                requested_model text NOT NULL,
                resolved_model text NOT NULL,
                provider text,
                connection_id text,
                upstream_model text,
                outcome text NOT NULL,
                status integer NOT NULL,
                stream boolean NOT NULL,
                latency_ms double precision NOT NULL,
                ttfb_ms double precision,
                input_tokens bigint NOT NULL,
                output_tokens bigint NOT NULL,
                cache_read_tokens bigint NOT NULL,
                cache_write_tokens bigint NOT NULL,
                reasoning_tokens bigint NOT NULL,
                attempts json NOT NULL,
                rung text,
                plan json,
                cost_usd double precision NOT NULL DEFAULT 0,
                list_cost_usd double precision
            )
            """,
            "CREATE INDEX requests_started_at ON {schema}.requests (started_at)",
        ),
    ),
)
LATEST = MIGRATIONS[-1].version


class SchemaConflict(Exception):
    """The schema holds tables rungway did not make; the message says what to change."""


def quoted(schema: str) -> str:
    """The schema name as an SQL identifier (config allows only [a-z0-9_] in it)."""
    return '"' + schema.replace('"', '""') + '"'


async def migrate(connection: asyncpg.Connection, schema: str) -> int:
    """Apply the migrations `schema` lacks, in order, under an advisory lock; the version
    it is at afterwards."""
    import asyncpg  # noqa: PLC0415 - see the import for type checking above

    name = quoted(schema)
    async with connection.transaction():
        # Held until commit: a second replica waits here, then finds the work done.
        await connection.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"rungway:{schema}")
        if not await connection.fetchval("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema):
            await connection.execute(f"CREATE SCHEMA {name}")
        await connection.execute(
            f"CREATE TABLE IF NOT EXISTS {name}.rungway_migrations ("
            "version integer PRIMARY KEY, description text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {
            row["version"]
            for row in await connection.fetch(f"SELECT version FROM {name}.rungway_migrations")
        }
        for migration in MIGRATIONS:
            if migration.version in done:
                continue
            try:
                for statement in migration.statements:
                    await connection.execute(statement.format(schema=name))
            except asyncpg.DuplicateTableError as error:
                raise SchemaConflict(
                    f"schema {schema!r} already holds a table rungway did not make "
                    f"({error}); set ledger.postgres.schema to a schema of rungway's own"
                ) from None
            await connection.execute(
                f"INSERT INTO {name}.rungway_migrations (version, description) VALUES ($1, $2)",
                migration.version,
                migration.description,
            )
            log.info("ledger: postgres schema %s migrated to version %d", schema, migration.version)
        version = max(done | {LATEST})
    if version > LATEST:
        log.warning(
            "ledger: postgres schema %s is at version %d, newer than this rungway's %d; "
            "upgrade this replica",
            schema,
            version,
            LATEST,
        )
    return version
