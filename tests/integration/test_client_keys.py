"""Client keys with their own budgets and request rates, through the real gateway.

A key over its budget gets 429 in its client's API shape, naming the key and the period,
while the plan (which costs nothing) still serves it and other keys go on as before. A key
over its requests per minute gets 429 with the wait, and comes back once a minute has
passed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from rungway.clock import FakeClock
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    START,
    StartGateway,
    Upstreams,
)

KEYS = {"alice": "rk-alice", "bob": "rk-bob", "carol": "rk-carol"}
ALICE_BUDGET = 0.0001
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def _client_keys(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    for name, key in KEYS.items():
        monkeypatch.setenv(f"RUNGWAY_IT_KEY_{name.upper()}", key)
    return [
        {
            "name": "alice",
            "key": {"env": "RUNGWAY_IT_KEY_ALICE"},
            "budget_usd": ALICE_BUDGET,
            "budget_period": "day",
        },
        {"name": "bob", "key": {"env": "RUNGWAY_IT_KEY_BOB"}, "requests_per_minute": 3},
        {"name": "carol", "key": {"env": "RUNGWAY_IT_KEY_CAROL"}},
    ]


def _chat(http: httpx.Client, url: str, key: str, **body: Any) -> httpx.Response:
    return http.post(
        f"{url}/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": DEEPSEEK, "messages": HELLO, "max_tokens": 24, **body},
    )


def _messages(http: httpx.Client, url: str, key: str, model: str) -> httpx.Response:
    # Claude Code's request: the Claude plan serves no other client.
    return http.post(
        f"{url}/v1/messages",
        headers={"x-api-key": key, "anthropic-version": "2023-06-01", **CLAUDE_CODE_HEADERS},
        json={"model": model, "messages": HELLO, "max_tokens": 24},
    )


def test_a_key_over_its_budget_is_refused_paid_rungs_but_keeps_the_plan(
    start_gateway: StartGateway,
    sims: Upstreams,
    http: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gateway = start_gateway(client_keys=_client_keys(monkeypatch))
    statuses = []
    for _ in range(40):
        response = _chat(http, gateway.url, KEYS["alice"])
        statuses.append(response.status_code)
        if response.status_code != 200:
            break
    assert statuses[0] == 200
    assert statuses.count(200) >= 2
    assert statuses[-1] == 429, "alice never reached her budget"
    error = response.json()["error"]
    assert error["code"] == "budget_exhausted"
    assert "'alice'" in error["message"]
    assert "budget for this day" in error["message"]
    assert int(response.headers["retry-after"]) > 0

    rows = gateway.rows()
    spent = sum(row["cost_usd"] for row in rows if row["client_key"] == "alice")
    assert 0 < spent <= ALICE_BUDGET
    served = sum(1 for status in statuses if status == 200)
    assert len(sims.cheap.requests) == served, "a refused request reached the upstream"
    # The refusal is recorded, at no cost, so that `explain` and the dashboard find it.
    assert len(rows) == served + 1
    assert rows[0]["request_id"] == response.headers["x-rungway-request-id"]
    assert (rows[0]["outcome"], rows[0]["status"], rows[0]["cost_usd"]) == (
        "budget_exhausted",
        429,
        0.0,
    )
    assert rows[0]["connection_id"] is None

    # The same refusal in the Anthropic shape, on the paid API connection...
    refused = _messages(http, gateway.url, KEYS["alice"], f"api/{CLAUDE}")
    assert refused.status_code == 429
    body = refused.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "rate_limit_error"
    assert "'alice'" in body["error"]["message"]
    # ...while the plan, which costs nothing, still serves her.
    planned = _messages(http, gateway.url, KEYS["alice"], CLAUDE)
    assert planned.status_code == 200
    assert planned.headers["x-rungway-rung"] == "subscription"
    # Other keys are not held to alice's budget.
    assert _chat(http, gateway.url, KEYS["carol"]).status_code == 200


def test_a_key_over_its_rate_waits_for_a_minute_to_pass(
    start_gateway: StartGateway, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(START)
    gateway = start_gateway(client_keys=_client_keys(monkeypatch), clock=clock)
    # A malformed request is refused before it counts.
    assert _chat(http, gateway.url, KEYS["bob"], messages="not a list").status_code == 400
    for _ in range(3):
        assert _chat(http, gateway.url, KEYS["bob"]).status_code == 200
        clock.advance(10)
    over = _chat(http, gateway.url, KEYS["bob"])
    assert over.status_code == 429
    error = over.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert "'bob'" in error["message"]
    assert "3 requests per minute" in error["message"]
    # The first request started 30 s ago: its slot frees in 30 s.
    assert over.headers["retry-after"] == "30"
    anthropic_shaped = _messages(http, gateway.url, KEYS["bob"], CLAUDE)
    assert anthropic_shaped.status_code == 429
    assert anthropic_shaped.json()["error"]["type"] == "rate_limit_error"
    # Other keys have no limit.
    assert _chat(http, gateway.url, KEYS["carol"]).status_code == 200
    clock.advance(30)
    assert _chat(http, gateway.url, KEYS["bob"]).status_code == 200
    # Four served and two refused over the rate (recorded, at no cost); the malformed one
    # left no row.
    bobs = [row for row in gateway.rows() if row["client_key"] == "bob"]
    assert sorted(row["outcome"] for row in bobs) == ["ok"] * 4 + ["rate_limit_exceeded"] * 2
    assert all(row["cost_usd"] == 0 for row in bobs if row["outcome"] != "ok")
