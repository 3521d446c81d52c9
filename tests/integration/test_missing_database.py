"""A PostgreSQL ledger whose database does not exist: the gateway names that database, at
start and on each refused request, with the command that creates it, and never blames
Redis, which answers."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.services import REDIS_URL

from .conftest import DEEPSEEK, StartGateway

MISSING = "rw_no_such_database"
HELLO: list[dict[str, Any]] = [{"role": "user", "content": "Say hello."}]


def test_a_missing_postgres_database_is_named_with_the_command_that_creates_it(
    start_gateway: StartGateway,
    redis_prefix: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    named = (
        f"the PostgreSQL database '{MISSING}' does not exist at 127.0.0.1:5432; "
        f"create it with `createdb {MISSING}`"
    )
    gateway = start_gateway(
        state_section={"store": "redis", "redis": {"url": REDIS_URL, "prefix": redis_prefix}},
        ledger={
            "path": str(tmp_path / "ledger.sqlite3"),
            "postgres": {"dsn": f"postgresql://postgres@127.0.0.1:5432/{MISSING}"},
        },
        ladder={"rung_budget_usd": {"cheap": 1.0, "premium": None}},
    )
    for _ in range(2):
        refused = httpx.post(
            f"{gateway.url}/v1/chat/completions",
            json={"model": DEEPSEEK, "messages": HELLO, "max_tokens": 16},
            timeout=10,
        )
        assert refused.status_code == 503, refused.text
        message = refused.json()["error"]["message"]
        assert named in message
        assert "redis" not in message.lower()

    stores = {each["store"]: each for each in httpx.get(f"{gateway.url}/healthz").json()["stores"]}
    assert stores["redis"]["up"]
    assert not stores["postgres"]["up"]
    assert named in stores["postgres"]["detail"]

    lines = [record.getMessage() for record in caplog.records]
    assert lines.count(f"ledger: {named}") == 1, lines
    assert not any("redis" in line.lower() and MISSING in line for line in lines), lines
    assert not any(record.exc_info for record in caplog.records)


def test_doctor_names_a_missing_postgres_database(tmp_path: Path) -> None:
    config = tmp_path / "rungway.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "ledger": {
                    "path": str(tmp_path / "ledger.sqlite3"),
                    "postgres": {"dsn": f"postgresql://postgres@127.0.0.1:5432/{MISSING}"},
                },
                "connections": [
                    {"id": "local", "provider": "ollama", "auth": "none", "models": ["m"]}
                ],
            }
        )
    )
    checked = subprocess.run(
        [sys.executable, "-m", "rungway", "doctor", "--config", str(config), "--timeout", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "220"},
    )
    line = next(
        line for line in checked.stdout.splitlines() if line.startswith("FAIL ledger postgres")
    )
    assert line.endswith(
        f"the PostgreSQL database '{MISSING}' does not exist at 127.0.0.1:5432; "
        f"create it with `createdb {MISSING}`"
    )
    assert "Traceback" not in checked.stderr
