"""Quota that tells the truth, through the real gateway: the plan's own headers drive the ladder.

The gateway and the simulated upstreams share one fake clock, so a 5-hour window passes in
a test in an instant.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest

from rungway.app import Gateway, build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE_CODE_HEADERS

START = 1_790_000_000.0
SUBSCRIPTION_TOKEN = "sk-ant-oat01-quota-plan"
API_KEY = "sk-ant-api03-quota-key"
FIVE_HOURS = 5 * 3600.0
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


@dataclass
class World:
    clock: FakeClock
    subscription: SimUpstream
    api: SimUpstream
    gateway: Gateway
    url: str
    ledger: Path

    def claude(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            base_url=self.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
        )

    def send(self, model: str = "auto/thrifty") -> str:
        raw = self.claude().messages.with_raw_response.create(
            model=model, max_tokens=64, messages=HELLO
        )
        return raw.headers["x-rungway-connection"]


def _subscription(clock_start: float) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "quota-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_TOKEN},
            "models": [{"id": "claude-sonnet-4-5"}, {"id": "claude-fable-5"}],
            "windows": [
                # About six requests of ~35 tokens each fill the 5h window.
                {"name": "5h", "claim": "five_hour", "capacity": 200, "length_s": FIVE_HOURS},
                {"name": "7d", "claim": "seven_day", "capacity": 100000, "length_s": 604800},
                {
                    "name": "7d_oi",
                    "claim": "seven_day_oi",
                    "capacity": 70,
                    "length_s": 604800,
                    "model": "claude-fable-5",
                },
            ],
            "clock": {"start": clock_start},
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


def _api() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "quota-api",
            "api": "anthropic",
            "quota_headers": "anthropic-apikey",
            "auth": {"kind": "x-api-key", "token": API_KEY},
            "models": [{"id": "claude-sonnet-4-5"}, {"id": "claude-fable-5"}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    marker = request.node.get_closest_marker("poll_interval_s")
    poll_interval_s = marker.args[0] if marker else 0
    clock = FakeClock(START)
    subscription = SimUpstream(_subscription(START), clock)
    api = SimUpstream(_api())
    (tmp_path / "plan").write_text(SUBSCRIPTION_TOKEN)
    (tmp_path / "api").write_text(API_KEY)
    with subscription, api:
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": poll_interval_s},
                # The API key's premium rung without a limit: only quota moves the ladder.
                "ladder": {"rung_budget_usd": {"premium": None}},
                "connections": [
                    {
                        "id": "plan",
                        "provider": "anthropic",
                        "auth": "oauth",
                        "credential": {"file": str(tmp_path / "plan")},
                        "base_url": subscription.url,
                        "models": ["claude-sonnet-4-5", "claude-fable-5"],
                    },
                    {
                        "id": "api",
                        "provider": "anthropic",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "api")},
                        "base_url": api.url,
                        "models": ["claude-sonnet-4-5", "claude-fable-5"],
                    },
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(clock, subscription, api, gateway, server.url, tmp_path / "ledger.sqlite3")


def test_plan_exhausts_thrifty_escalates_and_returns_on_the_first_request_after_reset(
    world: World,
) -> None:
    served = [world.send() for _ in range(10)]
    first_paid = served.index("api")
    assert served[:first_paid] == ["plan"] * first_paid
    assert served[first_paid:] == ["api"] * (10 - first_paid)
    # The plan's last answer already said its 5h window was spent: the ladder asks it no
    # more, so not a single request is wasted on a refusal.
    assert len(world.subscription.requests) == first_paid
    state = world.gateway.quota.connection_states(world.clock.now())["plan"]  # type: ignore[union-attr]
    reset = next(w.resets_at for w in state.windows if w.name == "5h")
    assert reset is not None

    world.clock.set(reset)
    assert world.send() == "plan", "the first request after the reset goes back to the plan"
    assert len(world.subscription.requests) == first_paid + 1


def test_a_429_cooldown_whose_backoff_overshoots_the_reset_ends_at_the_reset(
    world: World,
) -> None:
    while world.send() == "plan":
        pass
    state = world.gateway.quota.connection_states(world.clock.now())["plan"]  # type: ignore[union-attr]
    reset = next(w.resets_at for w in state.windows if w.name == "5h")
    assert reset is not None
    world.clock.set(reset - 30)
    # A request naming the plan goes there whatever the ladder knows, and meets the 429.
    with pytest.raises(anthropic.RateLimitError):
        world.send("plan/claude-sonnet-4-5")
    cooled = world.gateway.quota.connection_states(world.clock.now())["plan"]  # type: ignore[union-attr]
    # The backoff (60 s or more) would end after the reset; the clamp ends it at the reset.
    assert cooled.cooldown_until == reset
    world.clock.set(reset)
    assert world.send() == "plan"


def test_a_model_scoped_window_removes_only_its_model_from_the_plan(world: World) -> None:
    for _ in range(10):
        try:
            world.send("plan/claude-fable-5")
        except anthropic.RateLimitError:
            break
    else:
        pytest.fail("the plan's 7d_oi window never filled")
    state = world.gateway.quota.connection_states(world.clock.now())["plan"]  # type: ignore[union-attr]
    assert state.cooldown_until is None, "a per-model limit must not bench the whole plan"
    world.send("auto/thrifty")
    world.gateway.ledger.flush()
    row = read_rows(world.ledger, limit=1)[0]
    skipped = {(s["connection"], s["model"], s["reason"]) for s in row["plan"]["skipped"]}
    assert ("plan", "claude-fable-5", "quota_exhausted") in skipped
    first = row["plan"]["candidates"][0]
    assert (first["model"], first["connections"], first["rung"]) == (
        "claude-sonnet-4-5",
        ["plan"],
        "subscription",
    )
    assert row["connection_id"] == "plan"


def _usage_polls(sim: SimUpstream) -> int:
    return sum(1 for request in sim.requests if request.path == "/api/oauth/usage")


def test_subscription_on_a_cold_start_verifies_inline_and_serves_from_the_plan(
    world: World,
) -> None:
    assert world.send("auto/subscription") == "plan"
    assert [request.path for request in world.subscription.requests] == [
        "/api/oauth/usage",
        "/v1/messages",
    ]
    assert world.api.requests == []
    # Verified once: the next request needs no second poll.
    assert world.send("auto/subscription") == "plan"
    assert _usage_polls(world.subscription) == 1


@pytest.mark.poll_interval_s(3600)
def test_background_polls_read_the_plan_at_start_and_right_after_a_reset(world: World) -> None:
    board = world.gateway.quota
    assert board is not None
    deadline = time.monotonic() + 5
    # The upstream counts the poll before the gateway has read its answer: wait for both.
    while "plan" not in board.connection_states(world.clock.now()):
        assert time.monotonic() < deadline, "the start-up poll never reached the board"
        time.sleep(0.05)
    assert _usage_polls(world.subscription) == 1
    state = board.connection_states(world.clock.now())["plan"]
    reset = min(w.resets_at for w in state.windows if w.resets_at is not None)
    world.clock.set(reset + 1)
    deadline = time.monotonic() + 5
    while _usage_polls(world.subscription) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _usage_polls(world.subscription) == 2
