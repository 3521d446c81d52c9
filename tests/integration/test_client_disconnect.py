"""A client that hangs up mid-stream stops the upstream stream and is recorded as such."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from rungway.app import build_gateway
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.server.asgi import WATCH_AFTER_S
from rungway.sim import Scenario, SimUpstream


def test_hanging_up_closes_the_upstream_and_records_client_closed(tmp_path: Path) -> None:
    slow = Scenario.model_validate(
        {
            "name": "slow",
            "api": "openai",
            "models": [{"id": "slow-model"}],
            "response": {"output_tokens": 200, "chunk_tokens": 2, "chunk_interval_ms": 50},
        }
    )
    settings = parse_settings(
        {
            "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
            "connections": [
                {
                    "id": "slow",
                    "provider": "ollama",
                    "auth": "none",
                    "base_url": "http://placeholder/v1",
                    "models": ["slow-model"],
                }
            ],
        }
    )
    with SimUpstream(slow) as sim:
        settings = settings.model_copy(
            update={
                "connections": (
                    settings.connections[0].model_copy(update={"base_url": f"{sim.url}/v1"}),
                )
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            body = {
                "model": "slow-model",
                "stream": True,
                "messages": [{"role": "user", "content": "x"}],
            }
            started = time.monotonic()
            with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body) as response:
                first = next(response.iter_raw())
                assert b"data:" in first
            # The whole stream would take 100 chunks x 50 ms = 5 s.
            deadline = time.monotonic() + 4
            rows: list[dict[str, object]] = []
            while not rows and time.monotonic() < deadline:
                time.sleep(0.05)
                gateway.ledger.flush()
                rows = read_rows(tmp_path / "ledger.sqlite3")
            elapsed = time.monotonic() - started
    (row,) = rows
    assert row["outcome"] == "client_closed"
    assert elapsed < WATCH_AFTER_S + 2.0
    assert isinstance(row["output_tokens"], int)
    assert row["output_tokens"] < 200
