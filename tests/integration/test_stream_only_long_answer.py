"""A long answer from an upstream that only streams (the ChatGPT plan's Codex backend), to
a client that asked for one reply: the gateway reads the whole stream at once and answers
with it, at any length up to the body limit, instead of stalling until the idle timeout."""

from __future__ import annotations

from pathlib import Path

import httpx

from rungway.app import build_gateway
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream

TOKEN = "sim-codex-long-token"
WORD = "w" * 2000
WORDS = 300  # 600 KB of text, streamed as deltas, then again in the completed event


def test_a_long_answer_from_a_stream_only_upstream_arrives_whole(tmp_path: Path) -> None:
    scenario = Scenario.model_validate(
        {
            "name": "codex-plan",
            "api": "responses",
            "quota_headers": "codex",
            "codex": {"plan_type": "plus"},
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [{"id": "gpt-5-codex"}],
            "response": {"text": " ".join([WORD] * WORDS), "chunk_tokens": 20},
        }
    )
    (tmp_path / "plan").write_text(TOKEN)
    with SimUpstream(scenario) as sim:
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                # Short, so that a stalled read fails within the test's patience.
                "timeouts": {"idle_s": 3},
                "connections": [
                    {
                        "id": "codex-plan",
                        "provider": "codex",
                        "auth": "oauth",
                        "credential": {"file": str(tmp_path / "plan")},
                        "base_url": f"{sim.url}/backend-api/codex",
                        "models": ["gpt-5-codex"],
                    }
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            body = {"model": "codex-plan/gpt-5-codex", "input": "Say a lot.", "stream": False}
            response = httpx.post(f"{server.url}/v1/responses", json=body, timeout=30)
            gateway.ledger.flush()
            (row,) = read_rows(tmp_path / "ledger.sqlite3")
    assert response.status_code == 200, response.text[:300]
    (message,) = [item for item in response.json()["output"] if item["type"] == "message"]
    assert message["content"][0]["text"].count(WORD) == WORDS
    assert (row["outcome"], row["output_tokens"]) == ("ok", WORDS)
