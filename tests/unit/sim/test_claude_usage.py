"""The simulated Claude usage endpoint reports percent and ISO resets, and rate-limits itself."""

from __future__ import annotations

from datetime import datetime

import httpx

from rungway.clock import FakeClock
from rungway.sim import Scenario, SimUpstream

from .conftest import CLAUDE_CODE_HEADERS

START = 1_790_000_000.0
TOKEN = "sk-ant-oat01-usage"
PLAN = {"authorization": f"Bearer {TOKEN}", **CLAUDE_CODE_HEADERS}


def _scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "usage",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": TOKEN},
            "models": [{"id": "claude-sonnet-4-5"}],
            "windows": [
                {"name": "5h", "claim": "five_hour", "capacity": 100, "length_s": 18000},
                {"name": "7d", "claim": "seven_day", "capacity": 1000, "length_s": 604800},
            ],
            "usage_reads_per_hour": 2,
        }
    )


def test_usage_is_percent_with_iso_resets_and_the_endpoint_limits_itself() -> None:
    clock = FakeClock(START)
    with SimUpstream(_scenario(), clock) as sim:
        httpx.post(
            f"{sim.url}/v1/messages",
            headers={**PLAN, "anthropic-version": "2023-06-01"},
            json={
                "model": "claude-sonnet-4-5",
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}],
            },
        ).raise_for_status()
        usage = httpx.get(f"{sim.url}/api/oauth/usage", headers=PLAN).json()
        assert set(usage) == {"five_hour", "seven_day"}
        used = sim.state().windows[0].used
        assert usage["five_hour"]["utilization"] == round(used / 100 * 100, 1)
        assert datetime.fromisoformat(usage["five_hour"]["resets_at"]).timestamp() == START + 18000
        assert httpx.get(f"{sim.url}/api/oauth/usage", headers=PLAN).status_code == 200
        limited = httpx.get(f"{sim.url}/api/oauth/usage", headers=PLAN)
        assert limited.status_code == 429
        assert limited.json()["error"]["type"] == "rate_limit_error"
        assert int(limited.headers["retry-after"]) == 3601
        clock.advance(3601)
        assert httpx.get(f"{sim.url}/api/oauth/usage", headers=PLAN).status_code == 200


def test_usage_answers_only_plan_logins() -> None:
    with SimUpstream(_scenario(), FakeClock(START)) as sim:
        refused = httpx.get(f"{sim.url}/api/oauth/usage", headers={"x-api-key": "sk-ant-api03"})
        assert refused.status_code == 401
