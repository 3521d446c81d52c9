"""The simulated Antigravity upstream over HTTP: its envelope, its client check, its
buckets (one state behind generation, retrieveUserQuota and fetchAvailableModels), its
429s and the AI credits that pay past a spent bucket."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from rungway.clock import FakeClock
from rungway.quota.antigravity import read_antigravity_quota
from rungway.quota.errors import read_gemini_error
from rungway.sim import Scenario, SimUpstream
from rungway.sim.scenario import builtin_scenario, load_scenario

from .conftest import START, RawResponse, request

TOKEN = "ya29.sim-antigravity-test"
PROJECT = "test-antigravity-42"
FLASH = "gemini-3-flash"
SONNET = "claude-sonnet-4-6"
AGENT = "antigravity/cli/1.1.5 (aidev_client; os_type=linux; arch=amd64; auth_method=consumer)"


def antigravity_scenario(credits: dict[str, int] | None = None) -> Scenario:
    """Antigravity with a 5-hour bucket of 2 requests for Flash and a 60 s one for Sonnet."""
    login: dict[str, Any] = {"project": PROJECT}
    if credits is not None:
        login["credits"] = credits
    return Scenario.model_validate(
        {
            "name": "test-antigravity",
            "api": "antigravity",
            "auth": {"kind": "bearer", "token": TOKEN},
            "antigravity": login,
            "models": [{"id": FLASH}, {"id": SONNET}],
            "windows": [
                {"name": "flash", "unit": "requests", "capacity": 2, "length_s": 18000}
                | {"model": FLASH},
                {"name": "sonnet", "unit": "requests", "capacity": 1, "length_s": 60}
                | {"model": SONNET},
            ],
            "clock": {"start": START},
            "response": {"output_tokens": 6, "chunk_tokens": 3},
        }
    )


@pytest.fixture
def sim() -> Iterator[SimUpstream]:
    with SimUpstream(antigravity_scenario()) as upstream:
        yield upstream


def call(
    sim: SimUpstream, method: str, body: object, *, agent: str = AGENT, query: str = ""
) -> RawResponse:
    headers = {
        "authorization": f"Bearer {TOKEN}",
        "content-type": "application/json",
        "user-agent": agent,
    }
    return request(sim.url, "POST", f"/v1internal:{method}{query}", body, headers)


def envelope(model: str = FLASH, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "project": PROJECT,
        "model": model,
        "userAgent": "antigravity",
        "requestType": "agent",
        "requestId": "agent-0b5e",
        "request": {
            "contents": [{"role": "user", "parts": [{"text": "Hello"}]}],
            "sessionId": "-3750763034362895579",
        },
    }
    return body | overrides


def test_the_builtin_scenario_loads() -> None:
    scenario = load_scenario(builtin_scenario("antigravity"))
    assert scenario.api == "antigravity"
    assert scenario.antigravity is not None


def test_a_reply_and_each_stream_event_carry_the_envelope(sim: SimUpstream) -> None:
    whole = call(sim, "generateContent", envelope())
    assert whole.status == 200
    assert set(whole.json()) == {"response", "traceId"}
    streamed = call(sim, "streamGenerateContent", envelope(), query="?alt=sse")
    frames = [f for f in streamed.body.split(b"\r\n\r\n") if f]
    events = [orjson.loads(frame.removeprefix(b"data: ")) for frame in frames]
    assert events
    assert all(set(event) == {"response", "traceId"} for event in events)


def test_a_client_that_is_not_antigravity_is_refused_with_googles_shape(
    sim: SimUpstream,
) -> None:
    refused = call(sim, "generateContent", envelope(), agent="google-genai-sdk/1.30.0")
    assert refused.status == 403
    error = refused.json()["error"]
    assert error["status"] == "PERMISSION_DENIED"
    assert error["details"][0]["reason"] == "UNSUPPORTED_CLIENT"
    counted = {"request": {"model": f"models/{FLASH}", "contents": []}}
    assert call(sim, "countTokens", counted, agent="python-httpx").status == 403
    assert sim.tally.total().requests == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("userAgent", "gemini-cli"), ("requestType", "chat"), ("requestId", "")],
)
def test_an_envelope_without_antigravity_fields_is_a_400(
    sim: SimUpstream, field: str, value: str
) -> None:
    answer = call(sim, "generateContent", envelope(**{field: value}))
    assert answer.status == 400
    assert field in answer.json()["error"]["message"]


def test_load_names_the_project_and_onboard_takes_a_snake_case_tier(sim: SimUpstream) -> None:
    assert call(sim, "loadCodeAssist", {"metadata": {"ideType": "IDE_UNSPECIFIED"}}).status == 400
    loaded = call(sim, "loadCodeAssist", {"metadata": {"ideType": "ANTIGRAVITY"}}).json()
    assert loaded["cloudaicompanionProject"] == PROJECT
    assert loaded["paidTier"]["availableCredits"] == []
    tier = loaded["currentTier"]["id"]
    done = call(sim, "onboardUser", {"tier_id": tier, "metadata": {}}).json()
    assert done["response"]["cloudaicompanionProject"]["id"] == PROJECT
    assert call(sim, "onboardUser", {"tierId": tier}).status == 400


def test_a_spent_bucket_is_quota_exhausted_until_its_reset_and_the_quota_says_so(
    sim: SimUpstream,
) -> None:
    for _ in range(2):
        assert call(sim, "generateContent", envelope()).status == 200
    quota = call(sim, "retrieveUserQuota", {"project": PROJECT})
    buckets = {b["modelId"]: b for b in quota.json()["buckets"]}
    assert "remainingFraction" not in buckets[FLASH]
    assert buckets[SONNET]["remainingFraction"] == 1.0
    now = sim.clock.now()
    reading = read_antigravity_quota(quota.body, now=now)
    flash = next(w for w in reading.windows if w.model == FLASH)
    assert flash.used_percent == 100.0
    assert flash.resets_at == pytest.approx(START + 18000)

    refused = call(sim, "generateContent", envelope())
    assert refused.status == 429
    info = refused.json()["error"]["details"][0]
    assert info["reason"] == "QUOTA_EXHAUSTED"
    signal = read_gemini_error(429, refused.body, now=now)
    assert signal.terminal
    assert signal.windows[0].resets_at == pytest.approx(START + 18000, abs=1)
    assert sim.tally.total().requests == 2

    clock = sim.clock
    assert isinstance(clock, FakeClock)
    clock.advance(18000)
    assert call(sim, "generateContent", envelope()).status == 200
    models = call(sim, "fetchAvailableModels", {}).json()["models"]
    assert models[FLASH]["quotaInfo"]["remainingFraction"] == 0.5


def test_a_short_bucket_is_a_rate_limit_with_its_delay(sim: SimUpstream) -> None:
    assert call(sim, "generateContent", envelope(SONNET)).status == 200
    refused = call(sim, "generateContent", envelope(SONNET))
    assert refused.json()["error"]["details"][0]["reason"] == "RATE_LIMIT_EXCEEDED"
    signal = read_gemini_error(429, refused.body, now=sim.clock.now())
    assert not signal.terminal
    assert signal.retry_after_s == pytest.approx(60, abs=1)


def test_credits_pay_past_a_spent_bucket_only_when_asked_and_while_they_last() -> None:
    scenario = antigravity_scenario({"balance": 120, "minimum": 50, "per_request": 40})
    with SimUpstream(scenario) as sim:
        for _ in range(2):
            assert call(sim, "generateContent", envelope()).status == 200
        assert call(sim, "generateContent", envelope()).json()["error"]["details"][0]["reason"] == (
            "QUOTA_EXHAUSTED"
        )
        paid = call(sim, "generateContent", envelope(enabledCreditTypes=["GOOGLE_ONE_AI"]))
        assert paid.status == 200
        left = [{"creditType": "GOOGLE_ONE_AI", "creditAmount": "80"}]
        assert paid.json()["remainingCredits"] == left
        loaded = call(sim, "loadCodeAssist", {"metadata": {"ideType": "ANTIGRAVITY"}}).json()
        assert loaded["paidTier"]["availableCredits"][0]["creditAmount"] == "80"
        # 80 left, 40 a request and 50 the minimum: one more, then none.
        assert (
            call(sim, "generateContent", envelope(enabledCreditTypes=["GOOGLE_ONE_AI"])).status
            == 200
        )
        spent = call(sim, "generateContent", envelope(enabledCreditTypes=["GOOGLE_ONE_AI"]))
        assert spent.status == 429
        assert spent.json()["error"]["details"][0]["reason"] == "INSUFFICIENT_G1_CREDITS_BALANCE"
        assert sim.tally.total().requests == 4
        sim.reset()
        loaded = call(sim, "loadCodeAssist", {"metadata": {"ideType": "ANTIGRAVITY"}}).json()
        assert loaded["paidTier"]["availableCredits"][0]["creditAmount"] == "120"


def test_an_upstream_that_does_not_check_its_client_serves_any_user_agent() -> None:
    scenario = antigravity_scenario()
    login = scenario.antigravity
    assert login is not None
    lax = scenario.model_copy(update={"antigravity": login.model_copy(update={"clients": "any"})})
    with SimUpstream(lax) as sim:
        answer = call(sim, "generateContent", envelope(), agent="google-genai-sdk/1.30.0")
        assert answer.status == 200
