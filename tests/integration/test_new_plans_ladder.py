"""The ladder with the plans of 2026: a Kimi Code plan and a GLM Coding Plan on rung 0 and a
cheap key above them, all simulated, through the real gateway and a real client.

The gateway and the simulated upstreams share one fake clock, so a 5-hour window passes in
an instant. Kimi's window resets two hours in, GLM's at five, so each plan's return is
seen on its own. The client is Claude Code (its headers): the GLM plan's terms name Z.ai's
supported coding tools, of which rungway recognises Claude Code, and Kimi's let any
client use it, so no connection is widened but where a test says so: an OpenAI SDK script
is kept off the GLM plan by its terms unless its connection says `clients: any`. Each
plan's window is small, so a few requests spend it. The GLM plan is reached at its Chat
Completions endpoint, and in one test at its Anthropic one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
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
HOUR = 3600.0
CHEAP_KEY = "sk-new-plans-cheap"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
CLAUDE_CODE_HEADERS = {
    "user-agent": "claude-cli/2.1.332 (external, cli)",
    "x-app": "cli",
    "anthropic-beta": "claude-code-20250219",
}
"""What Claude Code sends on every request (docs/provider-signals.md A2.2)."""
GLM_RULE = "terms: a GLM Coding Plan serves Z.ai's supported coding tools only (Claude Code here)"
# About four answers of 24 tokens and their prompts fill a window of this many tokens.
PLAN_CAPACITY = 200


@dataclass(frozen=True)
class Plan:
    """One plan as a connection: its scenario, provider, path, model and first reset."""

    scenario: str
    provider: str
    path: str
    model: str
    first_reset_at: float
    usage_path: str


PLANS = {
    "kimi": Plan(
        "kimi-plan",
        "kimi-code",
        "/coding",
        "kimi-for-coding",
        START + 2 * HOUR,
        "/coding/v1/usages",
    ),
    "glm": Plan(
        "glm-plan",
        "glm-coding",
        "/api/coding/paas/v4",
        "glm-5.2",
        START + 5 * HOUR,
        "/api/monitor/usage/quota/limit",
    ),
}


def _plan_scenario(plan: Plan) -> Scenario:
    """A built-in plan scenario with a small 5-hour window and short answers."""
    raw = yaml.safe_load(builtin_scenario(plan.scenario).read_text(encoding="utf-8"))
    five_hours = {"name": "5h", "unit": "tokens", "capacity": PLAN_CAPACITY, "length_s": 5 * HOUR}
    raw["windows"] = [
        {**five_hours, "first_reset_at": plan.first_reset_at},
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
        """When the gateway knows the plan's spent 5-hour window resets (a usage read
        may run in the background, so it is waited for)."""
        deadline = time.monotonic() + 5
        while True:
            states = self.gateway.quota.connection_states(self.clock.now())  # type: ignore[union-attr]
            resets = [w.resets_at for w in states[connection_id].windows if w.name == "5h"]
            if resets and resets[0] is not None and resets[0] > self.clock.now():
                return resets[0]
            assert time.monotonic() < deadline, f"the gateway knows no 5h reset of {connection_id}"
            time.sleep(0.02)


@contextmanager
def _running(
    tmp_path: Path, glm_clients: str = "terms", glm_provider: str = "glm-coding"
) -> Iterator[World]:
    clock = FakeClock(START)
    sims = {name: SimUpstream(_plan_scenario(plan), clock) for name, plan in PLANS.items()}
    cheap = SimUpstream(_cheap(), clock)
    with sims["kimi"], sims["glm"], cheap:
        connections: list[dict[str, Any]] = []
        for name, plan in PLANS.items():
            (tmp_path / name).write_text(sims[name].scenario.auth.token or "")
            connection = {
                "id": name,
                "provider": plan.provider,
                "auth": "apikey",
                "credential": {"file": str(tmp_path / name)},
                "base_url": f"{sims[name].url}{plan.path}",
                "models": [plan.model],
            }
            if name == "glm":
                connection["clients"] = glm_clients
                if glm_provider == "glm-coding-anthropic":
                    # The same plan at its Messages endpoint, where Claude Code is pointed.
                    connection["provider"] = glm_provider
                    connection["base_url"] = f"{sims[name].url}/api/anthropic"
            connections.append(connection)
        (tmp_path / "cheap").write_text(CHEAP_KEY)
        connections.append(
            {
                "id": "cheap",
                "provider": "deepseek",
                "auth": "apikey",
                "credential": {"file": str(tmp_path / "cheap")},
                "base_url": f"{cheap.url}/v1",
                "models": ["deepseek-chat"],
            }
        )
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                # Usage endpoints are read at start and after each reset, as in service:
                # Kimi's spent-plan 403 names no reset, the last reading gives it.
                "quota": {"poll_interval_s": 300},
                "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
                "connections": connections,
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(clock, sims, cheap, gateway, server.url, tmp_path / "ledger.sqlite3")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with _running(tmp_path) as running:
        yield running


@pytest.fixture
def widened(tmp_path: Path) -> Iterator[World]:
    """The same world with the GLM connection widened to any client (`clients: any`)."""
    with _running(tmp_path, "any") as running:
        yield running


@pytest.fixture
def glm_messages(tmp_path: Path) -> Iterator[World]:
    """The same world with the GLM plan reached at its Anthropic endpoint."""
    with _running(tmp_path, glm_provider="glm-coding-anthropic") as running:
        yield running


def _ledger_matches_tallies(world: World) -> None:
    world.gateway.ledger.flush()
    rows = read_rows(world.ledger, limit=1000)
    for connection_id, sim in {**world.plans, "cheap": world.cheap}.items():
        served = [r for r in rows if r["connection_id"] == connection_id and r["outcome"] == "ok"]
        tally = sim.tally.total()
        assert len(served) == tally.requests, connection_id
        assert sum(r["input_tokens"] for r in served) == tally.input_tokens, connection_id
        assert sum(r["output_tokens"] for r in served) == tally.output_tokens, connection_id


def _until_refused(world: World, model: str) -> tuple[list[str], anthropic.APIStatusError]:
    served: list[str] = []
    for _ in range(30):
        try:
            served.append(world.send(model))
        except anthropic.APIStatusError as error:
            return served, error
    pytest.fail(f"{model} was never refused: {served}")


def _until_cheap(world: World) -> list[str]:
    served: list[str] = []
    while not served or served[-1] != "cheap":
        served.append(world.send("auto/thrifty"))
        assert len(served) < 30, f"the plans were never spent: {served}"
    return served


def test_subscription_uses_both_plans_and_refuses_once_both_are_spent(world: World) -> None:
    served, refused = _until_refused(world, "auto/subscription")
    assert set(served) == {"kimi", "glm"}
    assert refused.status_code == 429
    assert isinstance(refused.body, dict)
    assert refused.body["error"]["code"] == "subscription_unavailable"
    assert world.cheap.requests == []
    # Each plan was verified on its own usage endpoint before it served.
    for name, plan in PLANS.items():
        assert world.plans[name].requests[0].path == plan.usage_path, name
    _ledger_matches_tallies(world)


def test_thrifty_climbs_to_the_cheap_rung_and_comes_back_after_each_plans_reset(
    world: World,
) -> None:
    served = _until_cheap(world)
    assert set(served[:-1]) == {"kimi", "glm"}, "both plans serve before the cheap rung"
    assert world.reset_of("kimi") == pytest.approx(START + 2 * HOUR, abs=2)
    assert world.reset_of("glm") == pytest.approx(START + 5 * HOUR, abs=2)

    # Kimi's window resets first: the ladder comes back to it while GLM's is still spent.
    world.clock.set(world.reset_of("kimi"))
    again = _until_cheap(world)
    assert set(again[:-1]) == {"kimi"}
    # GLM's resets next: the ladder comes back to it, Kimi being spent again.
    world.clock.set(world.reset_of("glm"))
    assert world.send("auto/thrifty") == "glm"
    _ledger_matches_tallies(world)


def _openai_chat(world: World, model: str) -> str:
    client = openai.OpenAI(base_url=f"{world.url}/v1", api_key="unused", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=HELLO, max_tokens=64
    )
    return raw.headers["x-rungway-connection"]


def test_an_sdk_client_is_kept_off_the_glm_plan_by_its_terms_and_served_by_kimi(
    world: World,
) -> None:
    assert _openai_chat(world, "auto/subscription") == "kimi"
    assert [r.path for r in world.plans["glm"].requests if "chat" in r.path] == []
    world.gateway.ledger.flush()
    row = read_rows(world.ledger, limit=1)[0]
    (skip,) = [s for s in row["plan"]["skipped"] if s["connection"] == "glm"]
    assert (skip["reason"], skip["detail"], skip["rung"]) == ("terms", GLM_RULE, "subscription")
    with pytest.raises(openai.APIStatusError) as refused:
        _openai_chat(world, "glm/glm-5.2")
    assert GLM_RULE in refused.value.message


def test_a_widened_glm_connection_serves_an_sdk_client(widened: World) -> None:
    assert _openai_chat(widened, "glm/glm-5.2") == "glm"
    _ledger_matches_tallies(widened)


def test_claude_code_reaches_the_glm_plan_at_its_anthropic_endpoint(glm_messages: World) -> None:
    world = glm_messages
    served = _until_cheap(world)
    assert "glm" in served
    paths = {r.path for r in world.plans["glm"].requests}
    assert "/api/anthropic/v1/messages" in paths
    assert not any("chat" in path for path in paths)
    assert world.reset_of("glm") == pytest.approx(START + 5 * HOUR, abs=2)
    _ledger_matches_tallies(world)
