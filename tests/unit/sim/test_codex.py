"""A ChatGPT plan as Codex sees it: `x-codex-*` headers, the plan 429 and wham/usage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rungway.clock import FakeClock
from rungway.sim import CodexSpec, QuotaExhaustedFault, Scenario, SimUpstream, WindowSpec
from rungway.sim.quota.codex import codex_headers
from rungway.sim.quota.windows import QuotaBook

from .conftest import START, RawResponse, chat_body, request

TOKEN = "sim-codex-test-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
FIVE_HOURS = 18000
WEEK = 604800


NO_CREDITS = {"has_credits": False, "unlimited": False, "balance": "0"}


def codex_scenario(
    *windows: dict[str, Any], plan_type: str = "plus", credits: dict[str, Any] = NO_CREDITS
) -> Scenario:
    """A Codex plan on a FakeClock; by default a 4-request 5h and a 10-request weekly window,
    and no credits to pay past them."""
    return Scenario.model_validate(
        {
            "name": "test-codex",
            "api": "openai",
            "quota_headers": "codex",
            "usage_endpoint": "codex",
            "codex": {
                "plan_type": plan_type,
                "credits": credits,
            },
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [{"id": "gpt-5-codex"}],
            "windows": list(windows)
            or [
                {"name": "5h", "unit": "requests", "capacity": 4, "length_s": FIVE_HOURS},
                {"name": "7d", "unit": "requests", "capacity": 10, "length_s": WEEK},
            ],
            "clock": {"start": START},
            "usage_reads_per_hour": 3,
            "response": {"output_tokens": 10, "chunk_tokens": 5},
        }
    )


@pytest.fixture(scope="module")
def _codex_server() -> Iterator[SimUpstream]:
    with SimUpstream(codex_scenario()) as sim:
        yield sim


@pytest.fixture
def codex_sim(_codex_server: SimUpstream) -> SimUpstream:
    """The Codex plan sim, reset."""
    _codex_server.reset()
    return _codex_server


def send(sim: SimUpstream) -> RawResponse:
    return request(sim.url, "POST", "/v1/chat/completions", chat_body(model="gpt-5-codex"), AUTH)


def codex_header_values(response: RawResponse) -> dict[str, str]:
    return {
        name.lower(): value
        for name, value in response.headers
        if name.lower().startswith("x-codex-")
    }


def test_every_reply_carries_the_codex_header_family(codex_sim: SimUpstream) -> None:
    now = codex_sim.fake_clock.now()
    response = send(codex_sim)
    assert response.status == 200
    assert codex_header_values(response) == {
        "x-codex-plan-type": "plus",
        "x-codex-active-limit": "codex",
        "x-codex-primary-used-percent": "25.0",
        "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(int(now + FIVE_HOURS)),
        "x-codex-primary-reset-after-seconds": str(FIVE_HOURS),
        "x-codex-secondary-used-percent": "10.0",
        "x-codex-secondary-window-minutes": "10080",
        "x-codex-secondary-reset-at": str(int(now + WEEK)),
        "x-codex-secondary-reset-after-seconds": str(WEEK),
        "x-codex-credits-has-credits": "False",
        "x-codex-credits-unlimited": "False",
        "x-codex-credits-balance": "0",
    }
    codex_sim.fake_clock.advance(100)
    second = codex_header_values(send(codex_sim))
    assert second["x-codex-primary-used-percent"] == "50.0"
    assert second["x-codex-primary-reset-after-seconds"] == str(FIVE_HOURS - 100)
    assert second["x-codex-secondary-used-percent"] == "20.0"


def test_a_spent_window_is_usage_limit_reached_until_it_resets(codex_sim: SimUpstream) -> None:
    now = codex_sim.fake_clock.now()
    responses = [send(codex_sim) for _ in range(5)]
    assert [response.status for response in responses] == [200, 200, 200, 200, 429]
    rejected = responses[-1]
    assert rejected.json() == {
        "error": {
            "type": "usage_limit_reached",
            "message": "You have hit your ChatGPT usage limit (plus plan). Try again in ~300 min.",
            "plan_type": "plus",
            "resets_at": int(now + FIVE_HOURS),
        }
    }
    assert rejected.header("x-codex-primary-used-percent") == "100.0"
    assert rejected.header("x-codex-secondary-used-percent") == "40.0"
    assert codex_sim.tally.total().requests == 4

    usage = request(codex_sim.url, "GET", "/backend-api/wham/usage", headers=AUTH).json()
    assert usage["rate_limit"]["allowed"] is False
    assert usage["rate_limit"]["limit_reached"] is True
    assert usage["rate_limit"]["primary_window"]["used_percent"] == 100

    codex_sim.fake_clock.advance(FIVE_HOURS)
    recovered = send(codex_sim)
    assert recovered.status == 200
    assert recovered.header("x-codex-primary-used-percent") == "25.0"
    assert recovered.header("x-codex-primary-reset-at") == str(int(now + 2 * FIVE_HOURS))
    assert recovered.header("x-codex-secondary-used-percent") == "50.0"


def test_credits_serve_past_a_spent_window_and_both_signals_say_so() -> None:
    credits = {"has_credits": True, "unlimited": False, "balance": "9.99"}
    with SimUpstream(codex_scenario(credits=credits)) as sim:
        responses = [send(sim) for _ in range(6)]
        assert [response.status for response in responses] == [200] * 6
        past = responses[-1]
        assert past.header("x-codex-primary-used-percent") == "100.0"
        assert past.header("x-codex-credits-has-credits") == "True"
        assert past.header("x-codex-credits-balance") == "9.99"
        assert sim.tally.total().requests == 6
        usage = request(sim.url, "GET", "/backend-api/wham/usage", headers=AUTH).json()
        assert usage["rate_limit"]["allowed"] is True
        assert usage["rate_limit"]["limit_reached"] is True
        assert usage["rate_limit"]["primary_window"]["used_percent"] == 100
        assert usage["credits"] == credits


def test_an_exhaust_fault_shows_on_the_usage_endpoint(codex_sim: SimUpstream) -> None:
    codex_sim.push_fault(QuotaExhaustedFault(window="7d"))
    assert send(codex_sim).status == 429
    usage = request(codex_sim.url, "GET", "/api/codex/usage", headers=AUTH).json()
    assert usage["rate_limit"]["secondary_window"]["used_percent"] == 100
    assert usage["rate_limit"]["primary_window"]["used_percent"] == 0
    assert usage["rate_limit"]["limit_reached"] is True


def test_wham_usage_reports_the_same_windows_on_both_paths(codex_sim: SimUpstream) -> None:
    now = codex_sim.fake_clock.now()
    send(codex_sim)
    codex_sim.fake_clock.advance(25)
    expected = {
        "plan_type": "plus",
        "rate_limit": {
            "allowed": True,
            "limit_reached": False,
            "primary_window": {
                "used_percent": 25,
                "limit_window_seconds": FIVE_HOURS - 60,
                "reset_after_seconds": FIVE_HOURS - 25,
                "reset_at": int(now + FIVE_HOURS),
            },
            "secondary_window": {
                "used_percent": 10,
                "limit_window_seconds": WEEK - 60,
                "reset_after_seconds": WEEK - 25,
                "reset_at": int(now + WEEK),
            },
        },
        "credits": NO_CREDITS,
    }
    for path in ("/backend-api/wham/usage", "/api/codex/usage"):
        response = request(codex_sim.url, "GET", path, headers=AUTH)
        assert response.status == 200
        assert response.json() == expected


def test_wham_usage_limits_its_own_reads(codex_sim: SimUpstream) -> None:
    paths = ["/backend-api/wham/usage", "/api/codex/usage", "/backend-api/wham/usage"]
    assert [request(codex_sim.url, "GET", p, headers=AUTH).status for p in paths] == [200] * 3
    limited = request(codex_sim.url, "GET", "/api/codex/usage", headers=AUTH)
    assert limited.status == 429
    assert limited.header("retry-after") == "3601"
    error = limited.json()["error"]
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    codex_sim.fake_clock.advance(3601)
    assert request(codex_sim.url, "GET", "/api/codex/usage", headers=AUTH).status == 200


def test_wham_usage_needs_the_plan_token(codex_sim: SimUpstream) -> None:
    wrong = {"authorization": "Bearer sim-codex-wrong-token"}
    refused = request(codex_sim.url, "GET", "/backend-api/wham/usage", headers=wrong)
    assert refused.status == 401
    assert refused.json()["error"]["code"] == "invalid_api_key"
    assert request(codex_sim.url, "GET", "/backend-api/wham/usage").status == 401


def test_a_weekly_only_plan_reproduces_the_recorded_pro_response() -> None:
    weekly = {"name": "7d", "unit": "requests", "capacity": 100, "length_s": WEEK}
    with SimUpstream(codex_scenario(weekly, plan_type="pro")) as sim:
        now = sim.fake_clock.now()
        headers = codex_header_values(send(sim))
        usage = request(sim.url, "GET", "/backend-api/wham/usage", headers=AUTH).json()
    assert headers["x-codex-plan-type"] == "pro"
    assert headers["x-codex-primary-window-minutes"] == "10080"
    assert headers["x-codex-primary-used-percent"] == "1.0"
    assert headers["x-codex-primary-reset-at"] == str(int(now + WEEK))
    assert headers["x-codex-secondary-used-percent"] == "0.0"
    assert headers["x-codex-secondary-window-minutes"] == "0"
    assert headers["x-codex-secondary-reset-at"] == ""
    assert "x-codex-secondary-reset-after-seconds" not in headers
    assert usage["rate_limit"]["primary_window"]["limit_window_seconds"] == WEEK - 60
    assert usage["rate_limit"]["secondary_window"] is None
    assert usage["plan_type"] == "pro"


def test_header_percent_rounds_down_to_one_decimal_and_booleans_are_capitalised() -> None:
    clock = FakeClock(START)
    window = WindowSpec(name="5h", unit="requests", capacity=3, length_s=FIVE_HOURS)
    book = QuotaBook([window], clock)
    for _ in range(2):
        admission = book.admit("m", 1, 1)
    spec = CodexSpec.model_validate({"credits": {"unlimited": True}})
    headers = {name.decode(): value.decode() for name, value in codex_headers(admission, spec)}
    assert headers["x-codex-primary-used-percent"] == "66.6"
    assert headers["x-codex-credits-has-credits"] == "False"
    assert headers["x-codex-credits-unlimited"] == "True"
    assert headers["x-codex-credits-balance"] == "0"
