"""A shared store that does not answer: the gateway starts anyway, says so in `/healthz`,
`rungway status` and `rungway doctor`, and joins the store once it answers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.proxy import CuttableProxy
from tests.services import REDIS_URL

from .conftest import StartGateway


def _rungway(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rungway", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "220"},
    )


def _health(url: str) -> dict[str, Any]:
    answer = httpx.get(f"{url}/healthz")
    assert answer.status_code == 200, "degraded still serves"
    body: dict[str, Any] = answer.json()
    return body


def test_a_gateway_starts_without_redis_shows_it_degraded_and_joins_when_it_answers(
    start_gateway: StartGateway, redis_prefix: str
) -> None:
    with CuttableProxy(("127.0.0.1", 6379), up=False) as proxy:
        redis = {"url": f"redis://{proxy.address}/0", "prefix": redis_prefix}
        gateway = start_gateway(state_section={"store": "redis", "redis": redis})
        health = _health(gateway.url)
        assert health["status"] == "degraded"
        (store,) = health["stores"]
        assert store["store"] == "redis"
        assert not store["up"]
        assert f"redis at {proxy.address} unreachable" in store["detail"]
        assert "budgeted paid rungs refuse until it answers" in store["detail"]

        shown = _rungway("status", "--url", gateway.url)
        assert shown.returncode == 0, shown.stderr
        assert f"redis: degraded: redis at {proxy.address} unreachable" in shown.stdout

        proxy.restore()
        deadline = time.monotonic() + 10
        while _health(gateway.url)["status"] != "ok":
            assert time.monotonic() < deadline, "the gateway never joined Redis"
            time.sleep(0.1)
        shown = _rungway("status", "--url", gateway.url)
        assert f"redis: up: redis at {proxy.address}" in shown.stdout


def test_doctor_checks_the_state_store_and_postgres(tmp_path: Path, unused_port: int) -> None:
    def doctor(state: dict[str, object], ledger: dict[str, object]) -> list[str]:
        config = tmp_path / "rungway.yaml"
        document = {
            "ledger": {"path": str(tmp_path / "ledger.sqlite3"), **ledger},
            "state": state,
            "connections": [{"id": "local", "provider": "ollama", "auth": "none", "models": ["m"]}],
        }
        config.write_text(yaml.safe_dump(document))
        checked = _rungway("doctor", "--config", str(config), "--timeout", "1")
        return checked.stdout.splitlines()

    lines = doctor({}, {})
    assert any(line.startswith("OK   state: embedded, in ") for line in lines)
    assert any("ledger.sqlite3.state (not created yet); one process only" in line for line in lines)

    dead = f"redis://:hunter2secret@127.0.0.1:{unused_port}/0"
    lines = doctor(
        {"store": "redis", "redis": {"url": dead}},
        {"postgres": {"dsn": f"postgresql://postgres:pw@127.0.0.1:{unused_port}/postgres"}},
    )
    text = "\n".join(lines)
    assert "hunter2secret" not in text
    failed = next(i for i, line in enumerate(lines) if line.startswith("FAIL state redis"))
    assert f"127.0.0.1:{unused_port}/0: does not answer" in lines[failed]
    assert "the gateway starts, shows the store degraded" in lines[failed + 1]
    assert any(
        line.startswith(f"FAIL ledger postgres 127.0.0.1:{unused_port}/postgres: does not answer")
        for line in lines
    )

    lines = doctor(
        {"store": "redis", "redis": {"url": REDIS_URL}},
        {"postgres": {"dsn": "postgresql://postgres@127.0.0.1:5432/postgres"}},
    )
    assert any(line.startswith("OK   state redis 127.0.0.1:6379/0: answers") for line in lines)
    assert any(
        line.startswith("OK   ledger postgres 127.0.0.1:5432/postgres: answers") for line in lines
    )
