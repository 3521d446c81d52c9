"""`rungway doctor`'s checks of where live state and the ledger are shared: that the
configured Redis and PostgreSQL answer, or where the embedded store keeps its file.

Each check connects once with a short deadline and sends nothing but a ping (Redis) or
`SELECT 1` (PostgreSQL). An address is shown without its password.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import SecretStr

from rungway.cli.findings import Finding, Level
from rungway.config import Settings
from rungway.quota.embedded import state_path

UNREACHABLE_FIX = (
    "start it or correct the address; meanwhile the gateway starts, shows the store "
    "degraded, and joins when it answers"
)


def store_findings(
    settings: Settings, secrets: dict[str, SecretStr], ledger: Path, timeout: float
) -> list[Finding]:
    """One finding for the state store and, when configured, one for PostgreSQL."""
    findings = [_state_finding(settings, secrets, ledger, timeout)]
    if settings.ledger.postgres is not None and "postgres" in secrets:
        findings.append(_postgres_finding(secrets["postgres"].get_secret_value(), timeout))
    return findings


def address(url: str) -> str:
    """`host:port/path` of a URL or DSN (`unix:<path>` of a socket's), without user or
    password."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix:{parts.path}"
    where = parts.hostname or "localhost"
    if parts.port is not None:
        where += f":{parts.port}"
    return where + (parts.path if parts.path not in ("", "/") else "")


def _state_finding(
    settings: Settings, secrets: dict[str, SecretStr], ledger: Path, timeout: float
) -> Finding:
    state = settings.state
    if state.store == "memory":
        return Finding(Level.OK, "state", "kept in memory: forgotten when the gateway stops")
    if state.store == "embedded":
        path = (state.path or state_path(ledger)).expanduser()
        shown = "exists" if path.exists() else "not created yet"
        return Finding(Level.OK, "state", f"embedded, in {path} ({shown}); one process only")
    if "redis" not in secrets:
        return Finding(Level.FAIL, "state", "the Redis URL cannot be read", "see credentials above")
    url = secrets["redis"].get_secret_value()
    subject = f"state redis {address(url)}"
    import redis  # noqa: PLC0415 - only a shared state store needs it, and it is slow to import

    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        client.ping()
    except (redis.RedisError, OSError) as error:
        return Finding(Level.FAIL, subject, f"does not answer: {_line(error)}", UNREACHABLE_FIX)
    finally:
        client.close()
    return Finding(Level.OK, subject, "answers; live state, budgets and rate windows are shared")


def _postgres_finding(dsn: str, timeout: float) -> Finding:
    subject = f"ledger postgres {address(dsn)}"
    import asyncpg  # noqa: PLC0415 - only a PostgreSQL ledger needs it, and it is slow to import

    async def ping() -> None:
        connection = await asyncpg.connect(dsn, timeout=timeout)
        try:
            await connection.fetchval("SELECT 1")
        finally:
            await connection.close()

    try:
        asyncio.run(ping())
    except asyncpg.InvalidCatalogNameError:
        from rungway.ledger.drain import missing_database  # noqa: PLC0415 - with asyncpg

        fix = "rows wait in the local ledger until it exists"
        return Finding(Level.FAIL, subject, missing_database(dsn), fix)
    except (TimeoutError, OSError, asyncpg.PostgresError) as error:
        fix = "start it or correct ledger.postgres.dsn; rows wait in the local ledger meanwhile"
        return Finding(Level.FAIL, subject, f"does not answer: {_line(error)}", fix)
    return Finding(Level.OK, subject, "answers; ledger rows drain into it")


def _line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200] or type(error).__name__
