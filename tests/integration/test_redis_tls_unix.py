"""A shared Redis reached over TLS (`rediss://`, a self-signed CA named in the URL) or a
unix socket (`unix://`): the request path's own pipelined channel holds budgets through it,
end to end, as the health check, doctor and redis-py's client do."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from rungway.budget.period import period_start
from rungway.cluster.budget_scripts import nano
from tests.private_redis import PrivateRedis, make_certificates

from .conftest import DEEPSEEK, StartGateway

HELLO: list[dict[str, Any]] = [{"role": "user", "content": "Say hello."}]


@pytest.mark.parametrize("kind", ["tls", "unix"])
def test_budgeted_requests_hold_through_tls_and_unix_socket_redis(
    start_gateway: StartGateway, tmp_path: Path, kind: str
) -> None:
    tls = make_certificates(tmp_path) if kind == "tls" else None
    with PrivateRedis(tmp_path, tls=tls, unix=kind == "unix") as server:
        gateway = start_gateway(
            state_section={"store": "redis", "redis": {"url": server.url, "prefix": "rw"}},
            ladder={"rung_budget_usd": {"cheap": 1.0, "premium": None}},
        )
        (store,) = httpx.get(f"{gateway.url}/healthz").json()["stores"]
        assert store["up"], store
        for _ in range(3):
            answer = httpx.post(
                f"{gateway.url}/v1/chat/completions",
                json={"model": DEEPSEEK, "messages": HELLO, "max_tokens": 16},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-rungway-rung"] == "cheap"
        # The holds went through this server: its spend is the ledger's.
        spent = sum(row["cost_usd"] for row in gateway.rows() if row["rung"] == "cheap")
        assert spent > 0
        key = f"rw:budget:spent:rung:cheap:{int(period_start('month', time.time()))}"
        client = server.client()
        try:
            deadline = time.monotonic() + 5
            while (figure := client.hget(key, "s")) is None or int(figure) != nano(spent):
                assert time.monotonic() < deadline, (figure, nano(spent))
                time.sleep(0.02)
        finally:
            client.close()


@pytest.mark.parametrize("kind", ["tls", "unix"])
def test_doctor_reaches_tls_and_unix_socket_redis(tmp_path: Path, kind: str) -> None:
    tls = make_certificates(tmp_path) if kind == "tls" else None
    with PrivateRedis(tmp_path, tls=tls, unix=kind == "unix") as server:
        config = tmp_path / "rungway.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                    "state": {"store": "redis", "redis": {"url": server.url}},
                    "connections": [
                        {"id": "local", "provider": "ollama", "auth": "none", "models": ["m"]}
                    ],
                }
            )
        )
        checked = subprocess.run(
            [sys.executable, "-m", "rungway", "doctor", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "220"},
        )
        where = f"unix:{server.socket}" if kind == "unix" else f"127.0.0.1:{server.port}/0"
        assert f"OK   state redis {where}: answers" in checked.stdout, checked.stdout
