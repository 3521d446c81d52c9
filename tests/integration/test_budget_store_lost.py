"""A gateway whose shared budget store does not answer: budgeted paid rungs refuse, with a
reason naming the store, rather than spend unmetered; everything else keeps serving; and
once Redis answers, the spend counted meanwhile reaches it."""

from __future__ import annotations

import time
from typing import Any

import httpx
import redis

from rungway.budget.period import period_start
from rungway.cluster.budget_scripts import NANO
from tests.proxy import CuttableProxy
from tests.services import REDIS_URL

from .conftest import CLAUDE, CLAUDE_CODE_HEADERS, DEEPSEEK, StartGateway

HELLO: list[dict[str, Any]] = [{"role": "user", "content": "Say hello."}]


def _ask(url: str, model: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": model, "messages": HELLO, "max_tokens": 64},
        timeout=10,
    )


def _ask_as_claude_code(url: str, model: str) -> httpx.Response:
    """A Messages request as Claude Code sends it: the Claude plan serves no other client."""
    return httpx.post(
        f"{url}/v1/messages",
        headers={"anthropic-version": "2023-06-01", **CLAUDE_CODE_HEADERS},
        json={"model": model, "messages": HELLO, "max_tokens": 64},
        timeout=10,
    )


def _shared_spend(prefix: str, rung: str) -> float:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        start = int(period_start("month", time.time()))
        value = client.hget(f"{prefix}:budget:spent:rung:{rung}:{start}", "s")
    finally:
        client.close()
    return int(value) / NANO if value is not None else -1.0


def test_without_redis_budgeted_paid_rungs_refuse_and_the_rest_serve(
    start_gateway: StartGateway, redis_prefix: str
) -> None:
    with CuttableProxy(("127.0.0.1", 6379), up=False) as proxy:
        gateway = start_gateway(
            state_section={
                "store": "redis",
                "redis": {"url": f"redis://{proxy.address}/0", "prefix": redis_prefix},
            },
            # The cheap rung has a budget; premium (the Anthropic API key) has none.
            ladder={"rung_budget_usd": {"cheap": 1.0, "premium": None}},
        )
        refused = _ask(gateway.url, DEEPSEEK)
        assert refused.status_code == 503
        error = refused.json()["error"]
        assert error["code"] == "budget_store_unavailable"
        assert f"redis at {proxy.address}" in error["message"]
        assert "budgeted paid rungs refuse until it answers" in error["message"]
        assert "state.redis.url" in error["message"]

        # A paid rung without a budget, and the plan, need no shared spend.
        unbudgeted = _ask(gateway.url, f"api/{CLAUDE}")
        assert unbudgeted.status_code == 200, unbudgeted.text
        assert unbudgeted.headers["x-rungway-rung"] == "premium"
        subscription = _ask_as_claude_code(gateway.url, f"plan/{CLAUDE}")
        assert subscription.status_code == 200, subscription.text
        assert subscription.headers["x-rungway-rung"] == "subscription"

        proxy.restore()
        deadline = time.monotonic() + 10
        while httpx.get(f"{gateway.url}/healthz").json()["status"] != "ok":
            assert time.monotonic() < deadline, "the gateway never joined Redis"
            time.sleep(0.1)
        served = _ask(gateway.url, DEEPSEEK)
        assert served.status_code == 200, served.text
        assert served.headers["x-rungway-rung"] == "cheap"

        # What each rung spent reaches the shared spend: the premium request's cost was
        # queued while Redis was away and sent when it came back.
        rows = gateway.rows()
        for rung in ("cheap", "premium"):
            spent = sum(row["cost_usd"] for row in rows if row["rung"] == rung)
            assert spent > 0
            while abs(_shared_spend(redis_prefix, rung) - spent) > 1e-9:
                assert time.monotonic() < deadline + 5, (rung, _shared_spend(redis_prefix, rung))
                time.sleep(0.05)
        refusal = next(row for row in rows if row["status"] == 503)
        assert refusal["outcome"] == "budget_store_unavailable"
