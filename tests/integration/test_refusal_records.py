"""Refusals of well-formed requests leave a trace: a ledger row with the route plan behind
them, at no cost, that `rungway explain` finds and `/metrics` counts. A malformed request
leaves none, and a spent budget's answer says when the budget period resets."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rungway.clock import FakeClock
from tests.integration.conftest import (
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    START,
    StartGateway,
    Upstreams,
)
from tests.integration.test_ladder import Readings

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
KEY = "rk-refusal-dora"
MESSAGES = {"anthropic-version": "2023-06-01"}


def _explain(request_id: str, url: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rungway", "explain", request_id, "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _refusals(url: str) -> dict[tuple[str, str], float]:
    """`rungway_requests_total` of requests no connection served, by API and outcome."""
    scraped = httpx.get(f"{url}/metrics")
    assert scraped.status_code == 200
    return {
        (sample.labels["api"], sample.labels["outcome"]): sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
        if sample.name == "rungway_requests_total"
        and sample.labels["rung"] == "none"
        and sample.labels["connection"] == "none"
    }


def test_a_plan_that_cannot_serve_without_billing_is_recorded_with_its_skips(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    # No quota reading verifies the plan, so auto/subscription fails closed.
    gateway = start_gateway(state=Readings())
    # Claude Code's request, so that the plan is skipped for its missing quota, not its terms.
    refused = httpx.post(
        f"{gateway.url}/v1/messages",
        headers={**MESSAGES, **CLAUDE_CODE_HEADERS},
        json={"model": "auto/subscription", "max_tokens": 64, "messages": HELLO},
    )
    assert refused.status_code == 503
    assert refused.json()["error"]["message"].startswith("no plan connection can serve")
    request_id = refused.headers["x-rungway-request-id"]

    shown = _explain(request_id, gateway.url)
    assert f"{request_id} at " in shown
    assert "auto/subscription -> auto/subscription, served by nothing" in shown
    assert "outcome subscription_unavailable (HTTP 503)" in shown
    assert "cost $0.000000" in shown
    assert "ladder: auto/subscription" in shown
    for reason in ("quota_missing", "not_subscription"):
        assert reason in shown, reason
    assert _refusals(gateway.url) == {("anthropic_messages", "subscription_unavailable"): 1.0}
    assert all(sim.requests == [] for sim in sims.all())


def test_a_spent_budget_is_recorded_and_says_when_its_period_resets(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(
        clock=FakeClock(START),
        ladder={
            "rung_budget_usd": {"cheap": 0.000001, "premium": 0.000001},
            "budget_period": "day",
        },
    )
    refused = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": DEEPSEEK, "messages": HELLO, "max_tokens": 64},
    )
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "budget_exhausted"
    midnight = datetime.fromtimestamp(START, UTC).replace(hour=0, minute=0, second=0)
    reset = (midnight + timedelta(days=1)).timestamp()
    assert refused.headers["retry-after"] == str(round(reset - START))
    assert "resets at" in error["message"]

    request_id = refused.headers["x-rungway-request-id"]
    shown = _explain(request_id, gateway.url)
    assert f"{DEEPSEEK} -> {DEEPSEEK}, served by nothing" in shown
    assert "outcome budget_exhausted (HTTP 429)" in shown
    # The plan it was refused with: both connections that serve the model, in order.
    assert shown.index("cheap") < shown.index("backup")
    assert _refusals(gateway.url) == {("openai_chat", "budget_exhausted"): 1.0}
    assert sims.cheap.requests == []
    assert sims.backup.requests == []
    [row] = gateway.rows()
    assert (row["cost_usd"], row["connection_id"], row["rung"]) == (0.0, None, None)


def test_a_client_over_its_rate_is_recorded_and_a_malformed_request_is_not(
    start_gateway: StartGateway, sims: Upstreams, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNGWAY_IT_KEY_DORA", KEY)
    gateway = start_gateway(
        clock=FakeClock(START),
        client_keys=[
            {"name": "dora", "key": {"env": "RUNGWAY_IT_KEY_DORA"}, "requests_per_minute": 1}
        ],
    )
    headers = {"authorization": f"Bearer {KEY}"}
    chat = {"model": "fast", "messages": HELLO, "max_tokens": 24}
    url = f"{gateway.url}/v1/chat/completions"
    malformed = httpx.post(url, headers=headers, json={**chat, "messages": "not a list"})
    assert malformed.status_code == 400
    assert httpx.post(url, headers=headers, json=chat).status_code == 200
    over = httpx.post(url, headers=headers, json=chat)
    assert over.status_code == 429
    assert over.json()["error"]["code"] == "rate_limit_exceeded"

    request_id = over.headers["x-rungway-request-id"]
    shown = _explain(request_id, gateway.url)
    assert "fast -> fast, served by nothing" in shown
    assert "outcome rate_limit_exceeded (HTTP 429)" in shown
    assert _refusals(gateway.url) == {("openai_chat", "rate_limit_exceeded"): 1.0}
    rows = gateway.rows()
    assert [(row["outcome"], row["status"]) for row in rows] == [
        ("rate_limit_exceeded", 429),
        ("ok", 200),
    ]
    assert malformed.headers["x-rungway-request-id"] not in {row["request_id"] for row in rows}
    assert len(sims.cheap.requests) == 1
