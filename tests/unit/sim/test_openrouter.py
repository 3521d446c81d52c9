"""An OpenRouter key: `usage.cost` on every reply, `/api/v1/key`, and 402 out of credits."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rungway.sim import Scenario, SimUpstream

from .conftest import START, RawResponse, chat_body, request

TOKEN = "sk-or-v1-sim-test"
AUTH = {"authorization": f"Bearer {TOKEN}"}
PRICED = "anthropic/claude-sonnet-4.5"
FREE = "meta-llama/llama-3.3-70b-instruct:free"
# "Hello there" is 13 input tokens; replies are 10 tokens.
PROMPT_COST = 13 * 2000.0 / 1_000_000
COMPLETION_COST = 10 * 10000.0 / 1_000_000
COST = PROMPT_COST + COMPLETION_COST
INSUFFICIENT = {
    "error": {
        "code": 402,
        "message": "Insufficient credits. Add more using https://openrouter.ai/credits",
    }
}


def openrouter_scenario(credits: dict[str, Any]) -> Scenario:
    """A key priced so that one reply costs 0.126 credits, on a FakeClock."""
    return Scenario.model_validate(
        {
            "name": "test-openrouter",
            "api": "openai",
            "usage_endpoint": "openrouter",
            "credits": credits,
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [
                {"id": PRICED, "input_per_mtok": 2000.0, "output_per_mtok": 10000.0},
                {"id": FREE, "input_per_mtok": 0, "output_per_mtok": 0},
            ],
            "clock": {"start": START},
            "usage_reads_per_hour": 3,
            "response": {"output_tokens": 10, "chunk_tokens": 4},
        }
    )


@pytest.fixture(scope="module")
def _limited_server() -> Iterator[SimUpstream]:
    with SimUpstream(openrouter_scenario({"limit": 0.3, "label": "test-key"})) as sim:
        yield sim


@pytest.fixture
def key_sim(_limited_server: SimUpstream) -> SimUpstream:
    """A key with a 0.3-credit limit (two priced replies), reset."""
    _limited_server.reset()
    return _limited_server


def send(sim: SimUpstream, model: str = PRICED, **extra: Any) -> RawResponse:
    body = chat_body(model=model, **extra)
    return request(sim.url, "POST", "/v1/chat/completions", body, AUTH)


def read_key(sim: SimUpstream, path: str = "/api/v1/key") -> dict[str, Any]:
    response = request(sim.url, "GET", path, headers=AUTH)
    assert response.status == 200
    data: dict[str, Any] = response.json()["data"]
    return data


def priced_usage() -> dict[str, Any]:
    return {
        "prompt_tokens": 13,
        "completion_tokens": 10,
        "total_tokens": 23,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
        "cost": COST,
        "is_byok": False,
        "cost_details": {
            "upstream_inference_cost": None,
            "upstream_inference_prompt_cost": PROMPT_COST,
            "upstream_inference_completions_cost": COMPLETION_COST,
        },
    }


def test_a_reply_carries_its_cost_and_the_key_reports_it(key_sim: SimUpstream) -> None:
    response = send(key_sim)
    assert response.status == 200
    assert response.json()["usage"] == priced_usage()
    expected = {
        "label": "test-key",
        "limit": 0.3,
        "limit_reset": None,
        "limit_remaining": 0.3 - COST,
        "include_byok_in_limit": False,
        "usage": COST,
        "usage_daily": COST,
        "usage_weekly": COST,
        "usage_monthly": COST,
        "byok_usage": 0.0,
        "byok_usage_daily": 0.0,
        "byok_usage_weekly": 0.0,
        "byok_usage_monthly": 0.0,
        "is_free_tier": False,
        "is_management_key": False,
        "is_provisioning_key": False,
        "rate_limit": {
            "requests": -1,
            "interval": "10s",
            "note": "This field is deprecated and safe to ignore.",
        },
        "expires_at": None,
        "creator_user_id": None,
    }
    assert read_key(key_sim) == expected
    assert read_key(key_sim, "/api/v1/auth/key") == expected


def test_streams_always_end_with_a_priced_usage_chunk(key_sim: SimUpstream) -> None:
    response = send(key_sim, stream=True)
    assert response.status == 200
    events = response.events()
    assert events[-1].data == b"[DONE]"
    trailer = events[-2].json()
    assert isinstance(trailer, dict)
    assert trailer["choices"] == []
    assert trailer["usage"] == priced_usage()
    assert read_key(key_sim)["usage"] == COST


def test_out_of_credits_is_402_and_charges_nothing(key_sim: SimUpstream) -> None:
    responses = [send(key_sim) for _ in range(3)]
    assert [response.status for response in responses] == [200, 200, 402]
    assert responses[-1].json() == INSUFFICIENT
    assert key_sim.tally.total().requests == 2
    key = read_key(key_sim)
    assert key["usage"] == 2 * COST
    assert key["limit_remaining"] == 0.3 - COST - COST
    streamed = send(key_sim, stream=True)
    assert (streamed.status, streamed.json()) == (402, INSUFFICIENT)
    # A free model still answers while the balance is not negative.
    free = send(key_sim, FREE)
    assert free.status == 200
    assert free.json()["usage"]["cost"] == 0.0
    assert read_key(key_sim)["usage"] == 2 * COST


def test_credits_can_be_set_over_the_control_api(key_sim: SimUpstream) -> None:
    response = request(key_sim.url, "POST", "/_sim/credits", {"remaining": 1.0})
    assert (response.status, response.json()) == (200, {"limit_remaining": 1.0})
    assert read_key(key_sim)["limit_remaining"] == 1.0
    state = key_sim.state()
    assert state.credits is not None
    assert state.credits.limit_remaining == 1.0
    # A negative balance refuses even free models (docs/provider-signals.md A7).
    request(key_sim.url, "POST", "/_sim/credits", {"remaining": -0.5})
    assert (send(key_sim, FREE).status, send(key_sim, FREE).json()) == (402, INSUFFICIENT)
    bad = request(key_sim.url, "POST", "/_sim/credits", {"remaining": "lots"})
    assert bad.status == 400


def test_an_unlimited_key_never_runs_out_and_refuses_a_credit_control() -> None:
    with SimUpstream(openrouter_scenario({"limit": None})) as sim:
        assert [send(sim).status for _ in range(3)] == [200] * 3
        key = read_key(sim)
        assert (key["limit"], key["limit_remaining"]) == (None, None)
        assert key["usage"] == pytest.approx(3 * COST)
        refused = request(sim.url, "POST", "/_sim/credits", {"remaining": 1.0})
        assert refused.status == 409


def test_a_daily_limit_comes_back_at_utc_midnight() -> None:
    with SimUpstream(openrouter_scenario({"limit": 0.2, "reset": "daily"})) as sim:
        assert [send(sim).status for _ in range(2)] == [200, 402]
        today = datetime.fromtimestamp(sim.fake_clock.now(), UTC).date()
        midnight = datetime(today.year, today.month, today.day, tzinfo=UTC) + timedelta(days=1)
        sim.fake_clock.set(midnight.timestamp())
        assert send(sim).status == 200
        key = read_key(sim)
    assert key["limit_reset"] == "daily"
    assert key["limit_remaining"] == 0.2 - COST
    assert key["usage_daily"] == COST
    assert key["usage"] == 2 * COST


def test_the_key_endpoint_needs_the_key_and_limits_its_reads(key_sim: SimUpstream) -> None:
    missing = request(key_sim.url, "GET", "/api/v1/key")
    assert (missing.status, missing.json()) == (
        401,
        {"error": {"code": 401, "message": "No auth credentials found"}},
    )
    wrong = request(key_sim.url, "GET", "/api/v1/key", headers={"authorization": "Bearer sk-or"})
    assert (wrong.status, wrong.json()["error"]["message"]) == (401, "User not found.")
    for _ in range(3):
        read_key(key_sim)
    limited = request(key_sim.url, "GET", "/api/v1/key", headers=AUTH)
    assert limited.status == 429
    assert limited.header("retry-after") == "3601"
    assert limited.json() == {"error": {"code": 429, "message": "Rate limit exceeded"}}
