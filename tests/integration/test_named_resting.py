"""A model named directly skips connections that rest (a cooldown, an open breaker).

The gateway shares the plan's fake clock, so a cooldown ends when the test says.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from rungway.sim import HttpErrorFault
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    RunningGateway,
    StartGateway,
    Upstreams,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _ask(gateway: RunningGateway, model: str = CLAUDE) -> str:
    # Claude Code's client: the Claude plan serves no other.
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=HELLO)
    return raw.headers["x-rungway-connection"]


def _skips(row: dict[str, Any]) -> set[tuple[str, str]]:
    return {(skip["connection"], skip["reason"]) for skip in row["plan"]["skipped"]}


def test_a_cooling_plan_is_not_asked_again_until_its_cooldown_ends(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    clock = sims.subscription.fake_clock
    gateway = start_gateway(clock=clock)
    sims.subscription.push_fault(HttpErrorFault(status=429, retry_after_s=600))
    assert _ask(gateway) == "api"
    # Both the exact name and a name an alias maps to it are named routes.
    assert [_ask(gateway), _ask(gateway, "claude-sonnet-4-5-20250929")] == ["api", "api"]
    assert len(sims.subscription.requests) == 1, "a cooling plan must not be asked again"
    newest = gateway.rows()[0]
    assert newest["attempts"] == []
    assert ("plan", "cooldown") in _skips(newest)
    clock.advance(601)
    assert _ask(gateway) == "plan"


def test_every_connection_resting_answers_429_without_calling_an_upstream(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(clock=sims.subscription.fake_clock)
    sims.subscription.push_fault(HttpErrorFault(status=429, retry_after_s=600))
    sims.api.push_fault(HttpErrorFault(status=429, retry_after_s=120))
    with pytest.raises(anthropic.RateLimitError):
        _ask(gateway)
    asked = len(sims.subscription.requests), len(sims.api.requests)
    assert asked == (1, 1)
    for _ in range(3):
        with pytest.raises(anthropic.RateLimitError) as refused:
            _ask(gateway)
        assert refused.value.response.headers["retry-after"] == "120", "the earliest end"
        body = refused.value.response.json()
        assert body["type"] == "error"
        assert "every connection serving claude-sonnet-4-5 is resting" in body["error"]["message"]
    assert (len(sims.subscription.requests), len(sims.api.requests)) == asked


def test_an_open_breaker_is_skipped_while_another_connection_serves(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    clock = sims.subscription.fake_clock
    gateway = start_gateway(clock=clock)
    sims.subscription.push_fault(HttpErrorFault(status=500, times=5))
    assert [_ask(gateway) for _ in range(5)] == ["api"] * 5
    assert _ask(gateway) == "api"
    assert len(sims.subscription.requests) == 5, "an open breaker must not be asked"
    assert ("plan", "breaker_open") in _skips(gateway.rows()[0])
    # Half-open: the next request is the probe, and the plan serves it.
    clock.advance(30)
    assert _ask(gateway) == "plan"
