"""A Copilot seat: `GET /copilot_internal/user`, negative remaining with overage, 402 without."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from rungway.sim import QuotaExhaustedFault, Scenario, SimUpstream

from .conftest import START, RawResponse, chat_body, request

TOKEN = "gho_sim-copilot-test"
AUTH = {"authorization": f"Bearer {TOKEN}"}
MONTH = 30 * 86400
NO_QUOTA = {"error": {"message": "You have no quota", "code": "quota_exceeded"}}


def copilot_scenario(*, overage_permitted: bool) -> Scenario:
    """A seat with 3 premium requests a month, on a FakeClock."""
    return Scenario.model_validate(
        {
            "name": "test-copilot",
            "api": "openai",
            "usage_endpoint": "copilot",
            "copilot": {"plan": "individual", "overage_permitted": overage_permitted},
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [{"id": "gpt-4.1"}, {"id": "claude-sonnet-4.5"}],
            "windows": [{"name": "premium", "unit": "requests", "capacity": 3, "length_s": MONTH}],
            "clock": {"start": START},
            "usage_reads_per_hour": 4,
            "response": {"output_tokens": 6, "chunk_tokens": 3},
        }
    )


@pytest.fixture(scope="module")
def _hard_stop() -> Iterator[SimUpstream]:
    with SimUpstream(copilot_scenario(overage_permitted=False)) as sim:
        yield sim


@pytest.fixture(scope="module")
def _overage() -> Iterator[SimUpstream]:
    with SimUpstream(copilot_scenario(overage_permitted=True)) as sim:
        yield sim


@pytest.fixture
def seat(_hard_stop: SimUpstream) -> SimUpstream:
    """A seat without overage, reset."""
    _hard_stop.reset()
    return _hard_stop


@pytest.fixture
def billed_seat(_overage: SimUpstream) -> SimUpstream:
    """A seat with overage permitted, reset."""
    _overage.reset()
    return _overage


def send(sim: SimUpstream, model: str = "claude-sonnet-4.5") -> RawResponse:
    return request(sim.url, "POST", "/v1/chat/completions", chat_body(model=model), AUTH)


def read_user(sim: SimUpstream, headers: dict[str, str] = AUTH) -> RawResponse:
    return request(sim.url, "GET", "/copilot_internal/user", headers=headers)


def iso_millis(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def unlimited(quota_id: str, stamp: str) -> dict[str, Any]:
    return {
        "entitlement": 0,
        "remaining": 0,
        "quota_remaining": 0.0,
        "percent_remaining": 100.0,
        "credits_used": 0,
        "unlimited": True,
        "overage_count": 0,
        "overage_permitted": False,
        "quota_id": quota_id,
        "timestamp_utc": stamp,
        "has_quota": True,
    }


def test_user_endpoint_reports_the_premium_allowance(seat: SimUpstream) -> None:
    assert send(seat).status == 200
    now = seat.fake_clock.now()
    resets = seat.state().window("premium").reset_at
    stamp = iso_millis(now)
    response = read_user(seat, {"authorization": f"token {TOKEN}"})
    assert response.status == 200
    assert response.json() == {
        "login": "sim-user",
        "copilot_plan": "individual",
        "access_type_sku": "monthly_subscriber",
        "chat_enabled": True,
        "quota_reset_date": datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d"),
        "quota_reset_date_utc": iso_millis(resets),
        "quota_snapshots": {
            "premium_interactions": {
                "entitlement": 3,
                "remaining": 2,
                "quota_remaining": 2.0,
                "percent_remaining": 2 * 100 / 3,
                "credits_used": 1,
                "unlimited": False,
                "overage_count": 0,
                "overage_permitted": False,
                "quota_id": "premium_interactions",
                "timestamp_utc": stamp,
                "has_quota": True,
            },
            "chat": unlimited("chat", stamp),
            "completions": unlimited("completions", stamp),
        },
        "endpoints": {"api": seat.url},
    }


def test_without_overage_a_spent_allowance_is_402_until_the_month_resets(
    seat: SimUpstream,
) -> None:
    responses = [send(seat, model) for model in ("gpt-4.1", "claude-sonnet-4.5") * 2]
    assert [response.status for response in responses] == [200, 200, 200, 402]
    assert responses[-1].json() == NO_QUOTA
    assert seat.tally.total().requests == 3
    premium = read_user(seat).json()["quota_snapshots"]["premium_interactions"]
    assert (premium["remaining"], premium["quota_remaining"]) == (0, 0.0)
    assert (premium["percent_remaining"], premium["has_quota"]) == (0.0, False)
    assert premium["overage_count"] == 0

    reset_at = seat.state().window("premium").reset_at
    seat.fake_clock.set(reset_at)
    assert send(seat).status == 200
    user = read_user(seat).json()
    assert user["quota_snapshots"]["premium_interactions"]["remaining"] == 2
    assert user["quota_reset_date_utc"] == iso_millis(reset_at + MONTH)


def test_an_exhaust_fault_is_refused_and_shows_as_spent(seat: SimUpstream) -> None:
    seat.push_fault(QuotaExhaustedFault())
    refused = send(seat)
    assert (refused.status, refused.json()) == (402, NO_QUOTA)
    premium = read_user(seat).json()["quota_snapshots"]["premium_interactions"]
    assert premium["remaining"] == 0


def test_with_overage_requests_keep_coming_and_remaining_goes_negative(
    billed_seat: SimUpstream,
) -> None:
    responses = [send(billed_seat) for _ in range(5)]
    assert [response.status for response in responses] == [200] * 5
    assert billed_seat.tally.total().requests == 5
    premium = read_user(billed_seat).json()["quota_snapshots"]["premium_interactions"]
    assert premium["remaining"] == -2
    assert premium["quota_remaining"] == -2.0
    assert premium["percent_remaining"] == 0.0
    assert premium["overage_count"] == 2
    assert premium["credits_used"] == 5
    assert premium["overage_permitted"] is True
    assert premium["has_quota"] is True


def test_user_endpoint_needs_the_login_and_limits_its_reads(seat: SimUpstream) -> None:
    missing = read_user(seat, {})
    assert missing.status == 401
    assert missing.json() == {
        "message": "Requires authentication",
        "documentation_url": "https://docs.github.com/rest",
        "status": "401",
    }
    wrong = read_user(seat, {"authorization": "token gho_wrong"})
    assert (wrong.status, wrong.json()["message"]) == (401, "Bad credentials")
    assert [read_user(seat).status for _ in range(4)] == [200] * 4
    seat.fake_clock.advance(600)
    limited = read_user(seat)
    assert limited.status == 429
    assert limited.header("retry-after") == str(3600 - 600 + 1)
    assert limited.json()["message"] == "API rate limit exceeded for user."


def test_a_seat_without_a_premium_window_is_unlimited() -> None:
    raw = copilot_scenario(overage_permitted=False).model_dump(mode="json")
    raw["windows"] = []
    with SimUpstream(Scenario.model_validate(raw)) as sim:
        assert send(sim).status == 200
        user = read_user(sim).json()
        now = sim.fake_clock.now()
    stamp = iso_millis(now)
    assert user["quota_snapshots"]["premium_interactions"] == unlimited(
        "premium_interactions", stamp
    )
    assert user["quota_reset_date"] == "2026-10-01"
