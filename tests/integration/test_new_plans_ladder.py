"""The ladder with the plans of 2026: a GLM Coding Plan on rung 0 and a cheap key above it,
all simulated, through the real gateway and a real client.

The gateway and the simulated upstreams share one fake clock, so a 5-hour window passes in
an instant. The client is Claude Code (its headers): the GLM plan's terms name Z.ai's
supported coding tools, of which rungway recognises Claude Code, so no connection is
widened here. Each plan's window is small, so a few requests spend it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest
import yaml

from rungway.app import Gateway, build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream, builtin_scenario

START = 1_790_000_000.0
FIVE_HOURS = 5 * 3600.0
CHEAP_KEY = "sk-new-plans-cheap"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
CLAUDE_CODE_HEADERS = {
    "user-agent": "claude-cli/2.1.332 (external, cli)",
    "x-app": "cli",
    "anthropic-beta": "claude-code-20250219",
}
"""What Claude Code sends on every request (docs/provider-signals.md A2.2)."""
# About four answers of 24 tokens and their prompts fill a window of this many tokens.
PLAN_CAPACITY = 200


def _plan(name: str) -> Scenario:
    """A built-in plan scenario with a small 5-hour window and short answers."""
    raw = yaml.safe_load(builtin_scenario(name).read_text(encoding="utf-8"))
    raw["windows"] = [
        {"name": "5h", "unit": "tokens", "capacity": PLAN_CAPACITY, "length_s": FIVE_HOURS},
        {"name": "7d", "unit": "tokens", "capacity": 100 * PLAN_CAPACITY, "length_s": 604800},
    ]
    raw["response"] = {"output_tokens": 24, "chunk_tokens": 4}
    return Scenario.model_validate(raw)


def _cheap() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "new-plans-cheap",
            "api": "openai",
            "auth": {"kind": "bearer", "token": CHEAP_KEY},
            "models": [{"id": "deepseek-chat", "context_window": 64000}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@dataclass
class World:
    clock: FakeClock
    plans: dict[str, SimUpstream]
    cheap: SimUpstream
    gateway: Gateway
    url: str
    ledger: Path

    def send(self, model: str) -> str:
        client = anthropic.Anthropic(
            base_url=self.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
        )
        raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=HELLO)
        return raw.headers["x-rungway-connection"]

    def reset_of(self, connection_id: str) -> float:
        """When the gateway knows the plan's spent 5-hour window resets."""
        states = self.gateway.quota.connection_states(self.clock.now())  # type: ignore[union-attr]
        resets = [w.resets_at for w in states[connection_id].windows if w.name == "5h"]
        assert resets, f"the gateway knows no 5h window of {connection_id}"
        assert resets[0] is not None
        return resets[0]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    clock = FakeClock(START)
    glm = SimUpstream(_plan("glm-plan"), clock)
    cheap = SimUpstream(_cheap(), clock)
    (tmp_path / "glm").write_text(glm.scenario.auth.token or "")
    (tmp_path / "cheap").write_text(CHEAP_KEY)
    with glm, cheap:
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
                "connections": [
                    {
                        "id": "glm",
                        "provider": "glm-coding",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "glm")},
                        "base_url": f"{glm.url}/api/coding/paas/v4",
                        "models": ["glm-5.2"],
                    },
                    {
                        "id": "cheap",
                        "provider": "deepseek",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "cheap")},
                        "base_url": f"{cheap.url}/v1",
                        "models": ["deepseek-chat"],
                    },
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(
                clock, {"glm": glm}, cheap, gateway, server.url, tmp_path / "ledger.sqlite3"
            )


def _ledger_matches_tallies(world: World) -> None:
    world.gateway.ledger.flush()
    rows = read_rows(world.ledger, limit=1000)
    sims = {**world.plans, "cheap": world.cheap}
    for connection_id, sim in sims.items():
        served = [r for r in rows if r["connection_id"] == connection_id and r["outcome"] == "ok"]
        tally = sim.tally.total()
        assert len(served) == tally.requests, connection_id
        assert sum(r["input_tokens"] for r in served) == tally.input_tokens, connection_id
        assert sum(r["output_tokens"] for r in served) == tally.output_tokens, connection_id


def _until_refused(world: World, model: str) -> tuple[list[str], anthropic.APIStatusError]:
    served: list[str] = []
    for _ in range(20):
        try:
            served.append(world.send(model))
        except anthropic.APIStatusError as error:
            return served, error
    pytest.fail(f"{model} was never refused: {served}")


def test_subscription_uses_the_plan_and_refuses_once_it_is_spent(world: World) -> None:
    served, refused = _until_refused(world, "auto/subscription")
    assert set(served) == {"glm"}
    assert refused.status_code == 429
    assert world.cheap.requests == []
    # The plan was verified on its quota endpoint before it served.
    assert world.plans["glm"].requests[0].path == "/api/monitor/usage/quota/limit"
    _ledger_matches_tallies(world)


def test_thrifty_climbs_to_the_cheap_rung_and_comes_back_after_the_reset(world: World) -> None:
    served = [world.send("auto/thrifty") for _ in range(10)]
    first_cheap = served.index("cheap")
    assert served[:first_cheap] == ["glm"] * first_cheap
    assert served[first_cheap:] == ["cheap"] * (10 - first_cheap)
    world.clock.set(world.reset_of("glm"))
    assert world.send("auto/thrifty") == "glm"
    _ledger_matches_tallies(world)
