"""`GET /metrics`: counters, histograms and live gauges from a gateway serving real traffic."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rungway.sim import HttpErrorFault, TimeoutFault

from .conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    RunningGateway,
    StartGateway,
    Upstreams,
)

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
ADMIN_KEY = "rw-admin-metrics"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(gateway: RunningGateway, **headers: str) -> Samples:
    response = httpx.get(f"{gateway.url}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _total(samples: Samples, name: str) -> float:
    return sum(value for (sample, _), value in samples.items() if sample == name)


def _claude(gateway: RunningGateway, *, stream: bool = False) -> str:
    # Claude Code's client: the Claude plan serves no other.
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        if stream:
            with client.messages.stream(model=CLAUDE, max_tokens=64, messages=HELLO) as events:
                events.until_done()
            return ""
        raw = client.messages.with_raw_response.create(model=CLAUDE, max_tokens=64, messages=HELLO)
    return raw.headers["x-rungway-connection"]


def _traffic(gateway: RunningGateway, sims: Upstreams) -> Samples:
    """Two plan requests (one streamed), a fall-through from the plan, a cheap request."""
    assert _claude(gateway) == "plan"
    _claude(gateway, stream=True)
    sims.subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert _claude(gateway) == "api", "the plan's 529 falls through to the API key"
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0) as client:
        client.chat.completions.create(model=DEEPSEEK, messages=HELLO)
    return _scrape(gateway)


def test_requests_fall_throughs_and_latency_are_counted(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    samples = _traffic(start_gateway(), sims)
    requests = "rungway_requests_total"
    subscription = {"rung": "subscription", "connection": "plan", "api": "anthropic_messages"}
    assert _get(samples, requests, **subscription, outcome="ok") == 2
    api = {"rung": "premium", "connection": "api", "api": "anthropic_messages"}
    assert _get(samples, requests, **api, outcome="ok") == 1
    cheap = {"rung": "cheap", "connection": "cheap", "api": "openai_chat"}
    assert _get(samples, requests, **cheap, outcome="ok") == 1
    assert _total(samples, requests) == 4
    fell = "rungway_fall_throughs_total"
    assert _get(samples, fell, connection="plan", failure="overloaded") == 1
    assert _total(samples, fell) == 1

    duration = "rungway_request_duration_seconds"
    assert _get(samples, f"{duration}_count", rung="subscription", outcome="ok") == 2
    assert _get(samples, f"{duration}_bucket", rung="premium", outcome="ok", le="+Inf") == 1
    overhead = "rungway_gateway_overhead_seconds"
    assert _get(samples, f"{overhead}_count") == 4
    # The gateway's own share is part of each request's duration, and a small one.
    assert _total(samples, f"{duration}_sum") - _total(samples, f"{overhead}_sum") > 0
    assert _get(samples, f"{overhead}_bucket", le="0.25") == 4


def test_tokens_spend_and_live_state_are_exposed(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    # On the plan's own clock, so that its window's reset lies ahead.
    # The gateway reads the plan's clock, which earlier tests may have moved past START.
    clock = sims.subscription.fake_clock
    ladder = {"rung_budget_usd": {"cheap": 5.0, "premium": None}}
    gateway = start_gateway(ladder=ladder, clock=clock)
    samples = _traffic(gateway, sims)
    tokens = "rungway_tokens_total"
    for rung in ("subscription", "premium", "cheap"):
        assert (_get(samples, tokens, rung=rung, kind="output") or 0) >= 24, rung
        assert (_get(samples, tokens, rung=rung, kind="input") or 0) > 0, rung
    assert _get(samples, "rungway_spend_usd_total", rung="subscription") == 0
    list_price = _get(samples, "rungway_list_price_spend_usd_total", rung="subscription")
    assert list_price is not None
    assert list_price > 0
    premium_spend = _get(samples, "rungway_spend_usd_total", rung="premium")
    assert premium_spend is not None
    assert premium_spend > 0
    cheap_spend = _get(samples, "rungway_spend_usd_total", rung="cheap")
    assert cheap_spend is not None
    assert cheap_spend > 0

    # Read live at the scrape: the plan's window from its headers, its 529's cooldown.
    window = {"connection": "plan", "window": "5h", "model": ""}
    board = gateway.gateway.quota
    assert board is not None
    now = clock.now()
    (reading,) = board.connection_states(now)["plan"].windows
    assert reading.used_percent is not None
    remaining = _get(samples, "rungway_quota_remaining_percent", **window)
    assert remaining == pytest.approx(100 - reading.used_percent)
    resets_in = _get(samples, "rungway_quota_reset_seconds", **window)
    assert reading.resets_at is not None
    assert resets_in is not None
    assert resets_in == reading.resets_at - now
    assert 0 < resets_in <= 5 * 3600
    assert _get(samples, "rungway_cooldown_active", connection="plan") == 1
    assert _get(samples, "rungway_cooldown_active", connection="api") == 0
    assert _get(samples, "rungway_breaker_state", connection="plan") == 0
    budget_left = _get(samples, "rungway_budget_remaining_usd", rung="cheap")
    assert budget_left == pytest.approx(5.0 - cheap_spend)


def test_time_spent_waiting_on_upstreams_is_not_gateway_overhead(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0) as client:
        # A slow answer, a slow stream, and a first attempt that times out (after 1.5 s)
        # before the backup answers.
        sims.cheap.push_fault(TimeoutFault(delay_s=0.5))
        client.chat.completions.create(model=DEEPSEEK, messages=HELLO)
        sims.cheap.push_fault(TimeoutFault(delay_s=0.5))
        for _ in client.chat.completions.create(model=DEEPSEEK, messages=HELLO, stream=True):
            pass
        sims.cheap.push_fault(TimeoutFault(delay_s=3))
        client.chat.completions.create(model=DEEPSEEK, messages=HELLO)
    samples = _scrape(gateway)
    assert _get(samples, "rungway_fall_throughs_total", connection="cheap", failure="timeout") == 1
    duration = "rungway_request_duration_seconds_bucket"
    assert _get(samples, duration, rung="cheap", outcome="ok", le="0.25") == 0
    assert _get(samples, duration, rung="cheap", outcome="ok", le="+Inf") == 3
    assert _total(samples, "rungway_request_duration_seconds_sum") > 2.5
    assert _get(samples, "rungway_gateway_overhead_seconds_bucket", le="0.25") == 3


def test_an_admin_key_guards_the_metrics(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNGWAY_IT_METRICS_ADMIN", ADMIN_KEY)
    gateway = start_gateway(admin={"key": {"env": "RUNGWAY_IT_METRICS_ADMIN"}})
    refused = httpx.get(f"{gateway.url}/metrics")
    assert refused.status_code == 401
    assert "admin key" in refused.json()["error"]["message"]
    wrong = httpx.get(f"{gateway.url}/metrics", headers={"authorization": "Bearer wrong"})
    assert wrong.status_code == 401
    assert ADMIN_KEY not in wrong.text
    samples = _scrape(gateway, authorization=f"Bearer {ADMIN_KEY}")
    assert _get(samples, "rungway_cooldown_active", connection="plan") == 0
    assert httpx.post(f"{gateway.url}/metrics").status_code == 405
