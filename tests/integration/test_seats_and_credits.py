"""A Copilot seat and an OpenRouter key through the real gateway and their simulated upstreams.

The seat's allowance and overage flag come from its usage endpoint; OpenRouter's credits
from its key endpoint. The gateway and the upstreams share one fake clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from rungway.app import Gateway, build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream

START = 1_790_000_000.0
SEAT_TOKEN = "gho_integration-seat"
ROUTER_KEY = "sk-or-v1-integration"
MONTH = 30 * 86400.0
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _seat(*, overage_permitted: bool) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "seat",
            "api": "openai",
            "usage_endpoint": "copilot",
            "copilot": {"plan": "individual", "overage_permitted": overage_permitted},
            "auth": {"kind": "bearer", "token": SEAT_TOKEN},
            "models": [{"id": "gpt-4.1"}],
            "windows": [{"name": "premium", "unit": "requests", "capacity": 3, "length_s": MONTH}],
            "response": {"output_tokens": 12},
        }
    )


def _router() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "router",
            "api": "openai",
            "usage_endpoint": "openrouter",
            "credits": {"limit": 5.0},
            "auth": {"kind": "bearer", "token": ROUTER_KEY},
            "models": [{"id": "gpt-4.1", "input_per_mtok": 2.0, "output_per_mtok": 8.0}],
            "response": {"output_tokens": 12},
        }
    )


@dataclass
class World:
    clock: FakeClock
    seat: SimUpstream
    router: SimUpstream
    gateway: Gateway
    url: str
    ledger: Path

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0)

    def send(self, model: str = "auto/thrifty") -> str:
        with self.client() as client:
            raw = client.chat.completions.with_raw_response.create(model=model, messages=HELLO)
        return raw.headers["x-rungway-connection"]

    def refresh(self, connection_id: str) -> dict[str, Any]:
        response = httpx.post(f"{self.url}/admin/connections/{connection_id}/refresh-quota")
        assert response.status_code == 200, response.text
        payload: dict[str, Any] = response.json()
        return payload

    def rows(self) -> list[dict[str, Any]]:
        self.gateway.ledger.flush()
        return read_rows(self.ledger)


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    marker = request.node.get_closest_marker("overage_permitted")
    clock = FakeClock(START)
    seat = SimUpstream(_seat(overage_permitted=bool(marker and marker.args[0])), clock)
    router = SimUpstream(_router(), clock)
    (tmp_path / "seat").write_text(SEAT_TOKEN)
    (tmp_path / "router").write_text(ROUTER_KEY)
    with seat, router:
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                # The router's premium rung without a rung limit: its own credits bound it.
                "ladder": {"rung_budget_usd": {"premium": None}},
                "connections": [
                    {
                        "id": "seat",
                        "provider": "copilot",
                        "auth": "oauth",
                        "credential": {"file": str(tmp_path / "seat")},
                        "base_url": f"{seat.url}/v1",
                        "usage_base_url": seat.url,
                        "models": ["gpt-4.1"],
                    },
                    {
                        "id": "router",
                        "provider": "openrouter",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "router")},
                        "base_url": f"{router.url}/v1",
                        "usage_base_url": f"{router.url}/api/v1",
                        "models": ["gpt-4.1"],
                    },
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(clock, seat, router, gateway, server.url, tmp_path / "ledger.sqlite3")


def test_subscription_verifies_a_cold_seat_through_its_usage_endpoint(world: World) -> None:
    assert world.send("auto/subscription") == "seat"
    polled, served = world.seat.requests
    assert polled.path == "/copilot_internal/user"
    assert polled.headers["authorization"] == f"token {SEAT_TOKEN}"
    assert served.path == "/v1/chat/completions"
    assert served.headers["copilot-integration-id"] == "vscode-chat"
    assert served.headers["x-initiator"] == "user"
    assert world.router.requests == []


@pytest.mark.overage_permitted(True)
def test_a_seat_that_bills_past_its_allowance_never_serves_subscription(world: World) -> None:
    with world.client() as client, pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model="auto/subscription", messages=HELLO)
    assert refused.value.status_code in (429, 503)
    assert "subscription_unavailable" in refused.value.response.text
    assert [r.path for r in world.seat.requests] == ["/copilot_internal/user"]
    # auto/thrifty still spends the seat first: it is the subscription rung.
    assert world.send() == "seat"
    # Newest first: the thrifty request, then the subscription refusal it was recorded as.
    served, refusal = world.rows()
    assert refusal["outcome"] == "subscription_unavailable"
    assert refusal["connection_id"] is None
    skipped = served["plan"]["skipped"] if served["plan"] else []
    assert all(skip["connection"] != "seat" for skip in skipped)


def test_a_spent_allowance_moves_thrifty_up_until_the_month_resets(world: World) -> None:
    served = [world.send() for _ in range(5)]
    assert served == ["seat", "seat", "seat", "router", "router"]
    # The fourth request met the seat's 402 `quota_exceeded`; the fifth did not try it.
    attempts = [
        [(a["connection_id"], a["outcome"]) for a in row["attempts"]] for row in world.rows()
    ]
    assert attempts[:2] == [[], [("seat", "quota_exhausted")]]
    seat = world.refresh("seat")
    (month,) = seat["windows"]
    assert (month["status"], month["used_percent"], month["source"]) == ("rejected", 100.0, "poll")
    reset = month["resets_at"]
    assert reset == pytest.approx(START + MONTH)
    world.clock.set(reset - 1)
    assert world.send() == "router", "the allowance is still spent"
    world.clock.set(reset)
    assert world.send() == "seat", "the first request after the reset goes back to the seat"


def test_openrouter_credits_are_read_and_a_402_is_billing(world: World) -> None:
    router = world.refresh("router")
    (credits,) = router["windows"]
    assert (credits["name"], credits["used_percent"], credits["status"]) == (
        "credits",
        0.0,
        "allowed",
    )
    httpx.post(f"{world.router.url}/_sim/credits", json={"remaining": 0.0}).raise_for_status()
    with world.client() as client, pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model="router/gpt-4.1", messages=HELLO)
    assert refused.value.status_code == 402
    (row,) = world.rows()
    assert [(a["connection_id"], a["outcome"]) for a in row["attempts"]] == [("router", "billing")]
    spent = world.refresh("router")["windows"][0]
    assert (spent["used_percent"], spent["status"]) == (100.0, "rejected")
