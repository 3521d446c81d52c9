"""Quota windows seen over HTTP: exhaustion 429s per header family, recovery after the
reset, model-scoped windows, and mixed-case header names."""

from __future__ import annotations

import anthropic
import openai
import pytest

from rungway.sim import QuotaExhaustedFault, SimUpstream

from .conftest import (
    ANTHROPIC_HEADERS,
    API_KEY,
    CLAUDE_CODE_HEADERS,
    OPENAI_KEY,
    START,
    RawResponse,
    chat_body,
    message_body,
    request,
)

SUBSCRIPTION_429 = "This request would exceed your account's rate limit. Please try again later."
OPENAI_AUTH = {"authorization": f"Bearer {OPENAI_KEY}"}


def send_subscription(sim: SimUpstream, model: str = "claude-sonnet-4-5") -> RawResponse:
    return request(sim.url, "POST", "/v1/messages", message_body(model=model), ANTHROPIC_HEADERS)


def test_plan_window_warns_then_rejects_then_recovers_after_reset(
    subscription_sim: SimUpstream,
) -> None:
    statuses: list[str | None] = []
    for _ in range(20):
        response = send_subscription(subscription_sim)
        statuses.append(response.header("anthropic-ratelimit-unified-5h-status"))
        if response.status == 429:
            break
    assert response.status == 429
    assert statuses[0] == "allowed"
    assert "allowed_warning" in statuses
    assert statuses[-1] == "rejected"
    body = response.json()
    assert body["type"] == "error"
    assert body["error"] == {"type": "rate_limit_error", "message": SUBSCRIPTION_429}
    assert response.header("anthropic-ratelimit-unified-status") == "rejected"
    assert response.header("anthropic-ratelimit-unified-representative-claim") == "five_hour"
    assert response.header("anthropic-ratelimit-unified-7d-status") == "allowed"
    reset_at = subscription_sim.state().window("5h").reset_at
    assert response.header("anthropic-ratelimit-unified-5h-reset") == str(int(reset_at))
    now = subscription_sim.fake_clock.now()
    assert response.header("retry-after") == str(round(reset_at - now))

    subscription_sim.fake_clock.advance(reset_at - now)
    recovered = send_subscription(subscription_sim)
    assert recovered.status == 200
    assert recovered.header("anthropic-ratelimit-unified-status") == "allowed"
    assert recovered.header("anthropic-ratelimit-unified-5h-reset") == str(int(reset_at + 18000))


def test_plan_429_reaches_the_sdk_as_rate_limit_error(subscription_sim: SimUpstream) -> None:
    subscription_sim.push_fault(QuotaExhaustedFault())
    client = anthropic.Anthropic(
        base_url=subscription_sim.url,
        auth_token="sk-ant-oat01-test-plan",
        max_retries=0,
        default_headers=CLAUDE_CODE_HEADERS,
    )
    with client, pytest.raises(anthropic.RateLimitError) as caught:
        client.messages.create(
            model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.response.headers["anthropic-ratelimit-unified-status"] == "rejected"
    assert subscription_sim.state().window("5h").used == 400
    assert subscription_sim.tally.by_model() == {}


def test_model_scoped_window_rejects_only_its_model(subscription_sim: SimUpstream) -> None:
    responses = [send_subscription(subscription_sim, "claude-fable-5") for _ in range(4)]
    assert [response.status for response in responses] == [200, 200, 200, 429]
    rejected = responses[-1]
    assert rejected.header("anthropic-ratelimit-unified-status") == "rejected"
    assert rejected.header("anthropic-ratelimit-unified-7d_oi-status") == "rejected"
    assert rejected.header("anthropic-ratelimit-unified-5h-status") == "allowed"
    assert rejected.header("anthropic-ratelimit-unified-7d-status") == "allowed"
    assert rejected.header("anthropic-ratelimit-unified-representative-claim") == "seven_day_oi"

    other = send_subscription(subscription_sim, "claude-sonnet-4-5")
    assert other.status == 200
    assert other.header("anthropic-ratelimit-unified-status") == "allowed"
    assert other.header("anthropic-ratelimit-unified-7d_oi-status") is None


def test_apikey_window_429_names_the_limit_and_sets_retry_after(apikey_sim: SimUpstream) -> None:
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
    responses = [
        request(apikey_sim.url, "POST", "/v1/messages", message_body(), headers) for _ in range(4)
    ]
    assert [response.status for response in responses] == [200, 200, 200, 429]
    assert responses[0].header("anthropic-ratelimit-requests-limit") == "3"
    assert responses[0].header("anthropic-ratelimit-requests-remaining") == "2"
    assert responses[0].header("anthropic-ratelimit-requests-reset") == "2026-09-21T14:14:20Z"
    assert responses[0].header("anthropic-ratelimit-output-tokens-remaining") == str(16000 - 5)
    rejected = responses[-1]
    assert rejected.header("anthropic-ratelimit-requests-remaining") == "0"
    assert rejected.header("retry-after") == "60"
    error = rejected.json()["error"]
    assert error["type"] == "rate_limit_error"
    assert error["message"].startswith("This request would exceed the rate limit for your")
    assert "of 3 requests per minute" in error["message"]
    apikey_sim.fake_clock.advance(60)
    again = request(apikey_sim.url, "POST", "/v1/messages", message_body(), headers)
    assert again.status == 200


def test_openai_request_window_429_is_rate_limit_exceeded(openai_sim: SimUpstream) -> None:
    responses = [
        request(openai_sim.url, "POST", "/v1/chat/completions", chat_body(), OPENAI_AUTH)
        for _ in range(6)
    ]
    assert [response.status for response in responses] == [200] * 5 + [429]
    first = responses[0]
    assert first.header("x-ratelimit-limit-requests") == "5"
    assert first.header("x-ratelimit-remaining-requests") == "4"
    assert first.header("x-ratelimit-reset-requests") == "1m0s"
    assert first.header("x-ratelimit-remaining-tokens") == str(2000 - 23)
    error = responses[-1].json()["error"]
    assert error["type"] == "requests"
    assert error["code"] == "rate_limit_exceeded"
    assert "on requests per min (RPM): Limit 5, Used 5, Requested 1." in error["message"]
    assert "Please try again in 60s." in error["message"]


def test_openai_token_window_429_via_the_sdk(openai_sim: SimUpstream) -> None:
    openai_sim.push_fault(QuotaExhaustedFault(window="tokens"))
    openai_sim.fake_clock.advance(30.8)
    client = openai.OpenAI(base_url=f"{openai_sim.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    with client, pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.type == "tokens"
    assert "on tokens per min (TPM): Limit 2000, Used 2000" in caught.value.message
    assert "Please try again in 29.2s." in caught.value.message
    assert caught.value.response.headers["x-ratelimit-remaining-tokens"] == "0"
    assert caught.value.response.headers["x-ratelimit-reset-tokens"] == "29.2s"


def test_quota_header_names_alternate_between_lower_and_capitalised(
    subscription_sim: SimUpstream, openai_sim: SimUpstream
) -> None:
    subscription = [send_subscription(subscription_sim), send_subscription(subscription_sim)]
    chat = [
        request(openai_sim.url, "POST", "/v1/chat/completions", chat_body(), OPENAI_AUTH)
        for _ in range(2)
    ]
    for responses, prefix in ((subscription, "anthropic-ratelimit-"), (chat, "x-ratelimit-")):
        spellings = set()
        for response in responses:
            names = [name for name, _ in response.headers if name.lower().startswith(prefix)]
            assert names
            spellings.add("lower" if all(name.islower() for name in names) else "capitalised")
            capitalised = [name for name in names if not name.islower()]
            assert all(name[0].isupper() for name in capitalised)
        assert spellings == {"lower", "capitalised"}
    lower, upper = sorted(subscription, key=lambda r: r.headers[-1][0].islower(), reverse=True)
    assert any(name == "anthropic-ratelimit-unified-status" for name, _ in lower.headers)
    assert any(name == "Anthropic-Ratelimit-Unified-Status" for name, _ in upper.headers)


def test_windows_start_from_the_scenario_clock(subscription_sim: SimUpstream) -> None:
    state = subscription_sim.state()
    assert state.fake_clock
    assert state.now >= START
    assert state.window("5h").reset_at == state.now + 18000
