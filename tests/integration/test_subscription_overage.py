"""Claude and ChatGPT plans that bill past their quota, through the real gateway.

A Claude plan with extra usage enabled and a ChatGPT plan holding credits keep serving once
a window is spent, and bill what they serve past it (docs/provider-signals.md A2.3, A2.5,
A4.3, A4.4). Their simulated upstreams say so in their headers and usage endpoints; the
gateway must keep such a plan out of `auto/subscription`, price what was served past the
quota at list price, and move `auto/thrifty` on once the window is spent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rungway.app import build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.pricing import TokenCounts, rates_for
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream

START = 1_790_000_000.0
SUBSCRIPTION_TOKEN = "sk-ant-oat01-overage-plan"
API_KEY = "sk-ant-api03-overage-key"
CODEX_TOKEN = "sim-codex-overage-token"
CHEAP_KEY = "sk-overage-cheap"
FIVE_HOURS = 18_000.0
WEEK = 604_800.0
HELLO = [{"role": "user", "content": "Say hello."}]


def _windows() -> list[dict[str, Any]]:
    # Three requests per 5h: a test spends the window by setting it to 3.
    return [
        {
            "name": "5h",
            "claim": "five_hour",
            "unit": "requests",
            "capacity": 3,
            "length_s": FIVE_HOURS,
        },
        {"name": "7d", "claim": "seven_day", "unit": "requests", "capacity": 100, "length_s": WEEK},
    ]


def _claude_subscription() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "claude-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "usage_endpoint": "claude",
            "extra_usage": {"enabled": True, "monthly_limit": 5000, "used_credits": 1234},
            # These tests are about billing past a plan's quota, sent in the OpenAI shape for
            # both vendors: the plan does not check its client here, and its connection is
            # widened (`clients: any`) below.
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_TOKEN, "clients": "any"},
            "models": [{"id": "claude-sonnet-4-5"}],
            "windows": _windows(),
            "response": {"output_tokens": 12},
        }
    )


def _claude_api() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "claude-api",
            "api": "anthropic",
            "quota_headers": "anthropic-apikey",
            "auth": {"kind": "x-api-key", "token": API_KEY},
            "models": [{"id": "claude-sonnet-4-5"}],
            "response": {"output_tokens": 12},
        }
    )


def _codex_subscription() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "codex-plan",
            "api": "responses",
            "quota_headers": "codex",
            "usage_endpoint": "codex",
            "codex": {
                "plan_type": "plus",
                "credits": {"has_credits": True, "unlimited": False, "balance": "9.99"},
            },
            "auth": {"kind": "bearer", "token": CODEX_TOKEN},
            "models": [{"id": "gpt-5-codex"}],
            "windows": _windows(),
            "response": {"output_tokens": 12},
        }
    )


def _cheap() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "cheap",
            "api": "openai",
            "auth": {"kind": "bearer", "token": CHEAP_KEY},
            "models": [{"id": "deepseek-chat"}],
            "response": {"output_tokens": 12},
        }
    )


@dataclass
class World:
    clock: FakeClock
    subscription: SimUpstream
    other: SimUpstream
    subscription_id: str
    model: str
    url: str
    ledger: Path
    flush: Any

    def send(self, model: str) -> httpx.Response:
        body = {"model": model, "messages": HELLO, "max_tokens": 64}
        return httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=30)

    def served_by(self, model: str) -> str:
        response = self.send(model)
        assert response.status_code == 200, response.text
        return response.headers["x-rungway-connection"]

    def inferences(self) -> list[str]:
        """The plan's generation requests (its usage reads left out)."""
        return [r.path for r in self.subscription.requests if "usage" not in r.path]

    def rows(self) -> list[dict[str, Any]]:
        self.flush()
        return read_rows(self.ledger)

    def connection(self) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/admin/connections")
        response.raise_for_status()
        entries: list[dict[str, Any]] = response.json()["connections"]
        return next(entry for entry in entries if entry["id"] == self.subscription_id)


def _world(tmp_path: Path, vendor: str) -> Iterator[World]:
    clock = FakeClock(START)
    if vendor == "claude":
        subscription, other = (
            SimUpstream(_claude_subscription(), clock),
            SimUpstream(_claude_api(), clock),
        )
    else:
        subscription, other = (
            SimUpstream(_codex_subscription(), clock),
            SimUpstream(_cheap(), clock),
        )
    with subscription, other:
        if vendor == "claude":
            subscription_entry = {
                "provider": "anthropic",
                "base_url": subscription.url,
                "token": SUBSCRIPTION_TOKEN,
            }
            other_entry = {"provider": "anthropic", "auth": "apikey", "base_url": other.url}
            secrets, model = (SUBSCRIPTION_TOKEN, API_KEY), "claude-sonnet-4-5"
        else:
            subscription_entry = {
                "provider": "codex",
                "base_url": f"{subscription.url}/backend-api/codex",
            }
            other_entry = {"provider": "deepseek", "auth": "apikey", "base_url": f"{other.url}/v1"}
            secrets, model = (CODEX_TOKEN, CHEAP_KEY), "gpt-5-codex"
        (tmp_path / "plan").write_text(secrets[0])
        (tmp_path / "other").write_text(secrets[1])
        subscription_id = f"{vendor}-plan"
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"cheap": 10, "premium": 10}},
                "connections": [
                    {
                        "id": subscription_id,
                        "provider": subscription_entry["provider"],
                        "auth": "oauth",
                        "credential": {"file": str(tmp_path / "plan")},
                        "base_url": subscription_entry["base_url"],
                        "models": [model],
                        "clients": "any",
                    },
                    {
                        "id": "other",
                        "provider": other_entry["provider"],
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "other")},
                        "base_url": other_entry["base_url"],
                        "models": [
                            model if vendor == "claude" else "deepseek-chat",
                        ],
                    },
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(
                clock,
                subscription,
                other,
                subscription_id,
                model,
                server.url,
                tmp_path / "ledger.sqlite3",
                gateway.ledger.flush,
            )


@pytest.fixture(params=["claude", "codex"])
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    yield from _world(tmp_path, request.param)


def test_a_plan_that_bills_past_its_quota_never_serves_subscription(world: World) -> None:
    # Cold: the inline usage read says extra usage (or credits) is on.
    refused = world.send("auto/subscription")
    assert refused.status_code in (429, 503), refused.text
    assert "subscription_unavailable" in refused.text
    assert "overage" in refused.text
    assert world.inferences() == []
    # The window spent: still nothing reaches the plan through auto/subscription.
    world.subscription.set_window_used("5h", 3)
    for _ in range(3):
        assert world.send("auto/subscription").status_code in (429, 503)
    assert world.inferences() == []
    assert world.other.requests == []
    shown = world.connection()
    assert (shown["overage"], shown["overage_permitted"]) == ("meters-to-paid", True)


def test_the_response_headers_alone_keep_the_plan_out_of_subscription(world: World) -> None:
    # A request named for the plan reads its headers; no usage read is needed after it.
    assert world.served_by(f"{world.subscription_id}/{world.model}") == world.subscription_id
    assert world.send("auto/subscription").status_code in (429, 503)
    assert len(world.inferences()) == 1
    assert [r.path for r in world.subscription.requests if "usage" in r.path] == []


def test_a_request_served_past_the_quota_costs_list_price_and_thrifty_moves_on(
    world: World,
) -> None:
    assert world.served_by("auto/thrifty") == world.subscription_id
    # The window runs out behind the gateway's back (another client of the same login).
    world.subscription.set_window_used("5h", 3)
    assert world.served_by("auto/thrifty") == world.subscription_id, "the reading still showed room"
    assert world.served_by("auto/thrifty") == "other", "the answer said the window is spent"
    assert world.served_by("auto/thrifty") == "other"
    assert len(world.inferences()) == 2, "one request only was served past the window"
    first, past, *moved = reversed(world.rows())  # newest first
    assert (first["rung"], first["cost_usd"]) == ("subscription", 0.0)
    provider = "anthropic" if world.subscription_id == "claude-plan" else "codex"
    rates = rates_for(provider, world.model)
    assert rates is not None
    tokens = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    listed = rates.cost(TokenCounts(*(past[name] for name in tokens)))
    assert past["rung"] == "subscription"
    assert listed > 0
    assert past["cost_usd"] == pytest.approx(listed)
    assert past["list_cost_usd"] == pytest.approx(listed)
    assert all(row["connection_id"] == "other" for row in moved)
    shown = world.connection()
    assert (shown["overage_permitted"], shown["overage_in_use"]) == (True, True)
