"""Gemini Code Assist's `retrieveUserQuota`: one bucket per window, read off inference."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rungway.sim import Scenario, SimUpstream
from rungway.sim.quota.windows import rfc3339

from .conftest import START, RawResponse, chat_body, request

TOKEN = "ya29.sim-gemini-test"
AUTH = {"authorization": f"Bearer {TOKEN}"}
DAY = 86400
PATH = "/v1internal:retrieveUserQuota"


def gemini_scenario() -> Scenario:
    """Per-model daily limits of 3 requests and 5 a minute across models."""
    return Scenario.model_validate(
        {
            "name": "test-gemini",
            "api": "openai",
            "usage_endpoint": "gemini",
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [{"id": "gemini-2.5-pro"}, {"id": "gemini-2.5-flash"}],
            "windows": [
                {"name": "rpm", "unit": "requests", "capacity": 5, "length_s": 60},
                {
                    "name": "pro-daily",
                    "unit": "requests",
                    "capacity": 3,
                    "length_s": DAY,
                    "model": "gemini-2.5-pro",
                },
                {
                    "name": "flash-daily",
                    "unit": "requests",
                    "capacity": 3,
                    "length_s": DAY,
                    "model": "gemini-2.5-flash",
                },
            ],
            "clock": {"start": START},
            "usage_reads_per_hour": 2,
            "response": {"output_tokens": 4, "chunk_tokens": 2},
        }
    )


@pytest.fixture(scope="module")
def _gemini_server() -> Iterator[SimUpstream]:
    with SimUpstream(gemini_scenario()) as sim:
        yield sim


@pytest.fixture
def gemini_sim(_gemini_server: SimUpstream) -> SimUpstream:
    """The Code Assist sim, reset."""
    _gemini_server.reset()
    return _gemini_server


def send(sim: SimUpstream, model: str) -> RawResponse:
    return request(sim.url, "POST", "/v1/chat/completions", chat_body(model=model), AUTH)


def read_quota(sim: SimUpstream, headers: dict[str, str] = AUTH) -> RawResponse:
    return request(sim.url, "POST", PATH, {"project": "sim-project"}, headers)


def test_buckets_follow_the_windows_requests_were_charged_to(gemini_sim: SimUpstream) -> None:
    now = gemini_sim.fake_clock.now()
    for model in ("gemini-2.5-pro", "gemini-2.5-pro", "gemini-2.5-flash"):
        assert send(gemini_sim, model).status == 200
    response = read_quota(gemini_sim)
    assert response.status == 200
    assert response.json() == {
        "buckets": [
            {
                "remainingAmount": "2",
                "remainingFraction": 2 / 5,
                "resetTime": rfc3339(now + 60),
                "tokenType": "REQUESTS",
            },
            {
                "remainingAmount": "1",
                "remainingFraction": 1 / 3,
                "resetTime": rfc3339(now + DAY),
                "tokenType": "REQUESTS",
                "modelId": "gemini-2.5-pro",
            },
            {
                "remainingAmount": "2",
                "remainingFraction": 2 / 3,
                "resetTime": rfc3339(now + DAY),
                "tokenType": "REQUESTS",
                "modelId": "gemini-2.5-flash",
            },
        ]
    }


def test_a_spent_model_bucket_refuses_only_that_model_until_the_day_resets(
    gemini_sim: SimUpstream,
) -> None:
    statuses = []
    for _ in range(4):
        statuses.append(send(gemini_sim, "gemini-2.5-pro").status)
        gemini_sim.fake_clock.advance(60)  # stay clear of the per-minute limit
    assert statuses == [200, 200, 200, 429]
    assert send(gemini_sim, "gemini-2.5-flash").status == 200
    buckets = {b.get("modelId"): b for b in read_quota(gemini_sim).json()["buckets"]}
    assert (
        buckets["gemini-2.5-pro"]["remainingAmount"],
        buckets["gemini-2.5-pro"]["remainingFraction"],
    ) == ("0", 0.0)
    assert buckets["gemini-2.5-flash"]["remainingAmount"] == "2"

    reset_at = gemini_sim.state().window("pro-daily").reset_at
    gemini_sim.fake_clock.set(reset_at)
    assert send(gemini_sim, "gemini-2.5-pro").status == 200
    buckets = {b.get("modelId"): b for b in read_quota(gemini_sim).json()["buckets"]}
    assert buckets["gemini-2.5-pro"]["remainingAmount"] == "2"
    assert buckets["gemini-2.5-pro"]["resetTime"] == rfc3339(reset_at + DAY)


def test_quota_needs_the_oauth_token_and_limits_its_reads(gemini_sim: SimUpstream) -> None:
    refused = read_quota(gemini_sim, {"authorization": "Bearer ya29.wrong"})
    assert refused.status == 401
    assert refused.json()["error"]["status"] == "UNAUTHENTICATED"
    assert refused.json()["error"]["code"] == 401
    assert [read_quota(gemini_sim).status for _ in range(2)] == [200, 200]
    limited = read_quota(gemini_sim)
    assert limited.status == 429
    assert limited.header("retry-after") == "3601"
    assert limited.json() == {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
