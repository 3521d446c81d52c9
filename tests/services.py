"""The real Redis and PostgreSQL the shared-state tests use, each test isolated.

Redis: a key prefix of its own per test, whose keys are deleted when the test ends.
PostgreSQL: a schema of its own per test, dropped when the test ends. Both services run on
this machine (`.ci/run` starts them when they do not answer); nothing here mocks them.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator

import asyncpg
import pytest
import redis

REDIS_URL = os.environ.get("RUNGWAY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "RUNGWAY_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix no other test uses; its keys are gone after the test."""
    prefix = f"rwtest-{secrets.token_hex(6)}"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A PostgreSQL schema no other test uses, dropped with everything in it after the test."""
    schema = f"rwtest_{secrets.token_hex(6)}"

    async def run(statement: str) -> None:
        connection = await asyncpg.connect(POSTGRES_DSN)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run(f"CREATE SCHEMA {schema}"))
    yield schema
    asyncio.run(run(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
