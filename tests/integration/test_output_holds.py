"""A request that sets no output limit holds what its model can write, not a flat guess.

DeepSeek's chat model writes at most 8,192 tokens, so a request without `max_tokens` holds
8,192 tokens of output: a small budget serves it on a fresh ledger where holding the old
default of 32,768 refused it. When even that does not fit, the refusal says which
`max_tokens` would, in words for a request that never set one, and that value is served.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from rungway.app import build_gateway
from rungway.budget import DEFAULT_OUTPUT_CEILING
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.pricing import rates_for
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream

MODEL = "deepseek-chat"
LIMIT = 8_192
"""DeepSeek's own output limit for the chat model, as the model catalog records it."""


@contextmanager
def _gateway(tmp_path: Path, budget: float) -> Iterator[str]:
    scenario = Scenario.model_validate(
        {
            "name": "deepseek",
            "api": "openai",
            "auth": {"kind": "bearer", "token": "sk-deepseek"},
            "models": [{"id": MODEL, "max_output_tokens": LIMIT}],
            "response": {"output_tokens": 20},
        }
    )
    (tmp_path / "key").write_text("sk-deepseek")
    with SimUpstream(scenario) as sim:
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"cheap": budget}},
                "connections": [
                    {
                        "id": "deepseek",
                        "provider": "deepseek",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "key")},
                        "base_url": f"{sim.url}/v1",
                        "models": [MODEL],
                    }
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield server.url


def _chat(url: str, **fields: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], **fields}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=10)


def test_a_small_budget_serves_a_small_model_without_max_tokens_on_a_fresh_ledger(
    tmp_path: Path,
) -> None:
    rates = rates_for("deepseek", MODEL)
    assert rates is not None
    # Between what the model can write and the old flat guess, at the output rate alone.
    budget = 0.02
    assert rates.ceiling(200, LIMIT) < budget < rates.ceiling(0, DEFAULT_OUTPUT_CEILING)
    with _gateway(tmp_path, budget) as url:
        answer = _chat(url)
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-rungway-rung"] == "cheap"


def test_a_refusal_without_max_tokens_names_the_max_tokens_that_fits(tmp_path: Path) -> None:
    with _gateway(tmp_path, 0.005) as url:
        refused = _chat(url)
        assert refused.status_code == 429
        message = refused.json()["error"]["message"]
        assert "lower max_tokens" not in message
        assert "sets no max_tokens" in message
        fits = int(message.split("set max_tokens to at most ")[1].split()[0])
        assert "to fit the remaining $0.0050" in message
        assert 0 < fits < LIMIT

        # One that asks for more is told to lower it to about the same figure (its body is
        # a few bytes longer), and one that asks for that is served.
        too_many = _chat(url, max_tokens=LIMIT)
        assert too_many.status_code == 429
        told = too_many.json()["error"]["message"]
        lower = int(told.split("lower max_tokens to at most ")[1].split()[0])
        assert fits - 10 < lower <= fits
        assert _chat(url, max_tokens=lower).status_code == 200
