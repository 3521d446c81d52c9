"""Kimi Code (through its Messages and its Chat Completions endpoint) and the MiniMax Token
Plan on the ladder, each on rung 0 with a cheap key above it, all simulated, through the real
gateway.

The gateway and the simulated upstreams share one fake clock, so a 5-hour window passes in
an instant. Both plans' terms let any client use them, so the client here is the plain
Anthropic SDK (and, for Kimi, the OpenAI SDK too), with no connection widened. Each plan's
5-hour window is small, so a few requests spend it.
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
from rungway.sim.plan_settings import KimiSpec

START = 1_790_000_000.0
FIVE_HOURS = 5 * 3600.0
CHEAP_KEY = "sk-coding-plans-cheap"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


@dataclass(frozen=True)
class Plan:
    """One coding plan as a connection: its scenario, provider, path and window."""

    scenario: str
    provider: str
    path: str
    model: str
    unit: str
    capacity: int
    usage_path: str
    generation: str
    """Where the plan's requests go under `path`."""


PLANS = {
    "kimi": Plan(
        "kimi-plan",
        "kimi-code",
        "/coding",
        "kimi-for-coding",
        "tokens",
        200,
        "/coding/v1/usages",
        "/v1/messages",
    ),
    # The same plan through its Chat Completions endpoint.
    "kimi-openai": Plan(
        "kimi-plan",
        "kimi-code-openai",
        "/coding/v1",
        "kimi-for-coding",
        "tokens",
        200,
        "/coding/v1/usages",
        "/chat/completions",
    ),
    "minimax": Plan(
        "minimax-plan",
        "minimax-token-plan",
        "/anthropic",
        "MiniMax-M3",
        "requests",
        4,
        "/v1/token_plan/remains",
        "/v1/messages",
    ),
}


def _plan_scenario(plan: Plan) -> Scenario:
    raw = yaml.safe_load(builtin_scenario(plan.scenario).read_text(encoding="utf-8"))
    raw["windows"] = [
        {"name": "5h", "unit": plan.unit, "capacity": plan.capacity, "length_s": FIVE_HOURS},
        {"name": "7d", "unit": plan.unit, "capacity": 100 * plan.capacity, "length_s": 604800},
    ]
    raw["response"] = {"output_tokens": 24, "chunk_tokens": 4}
    return Scenario.model_validate(raw)


def _cheap() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "coding-plans-cheap",
            "api": "openai",
            "auth": {"kind": "bearer", "token": CHEAP_KEY},
            "models": [{"id": "deepseek-chat", "context_window": 64000}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@dataclass
class World:
    name: str
    plan: Plan
    clock: FakeClock
    sim: SimUpstream
    cheap: SimUpstream
    gateway: Gateway
    url: str
    ledger: Path

    def send(self, model: str, headers: dict[str, str] | None = None) -> str:
        client = anthropic.Anthropic(
            base_url=self.url, api_key="unused", max_retries=0, default_headers=headers
        )
        raw = client.messages.with_raw_response.create(model=model, max_tokens=64, messages=HELLO)
        return raw.headers["x-rungway-connection"]

    def wait_for_spent_window(self) -> None:
        """Wait for the background usage read that finds the 5-hour window spent."""
        deadline = time.monotonic() + 5
        while True:
            states = self.gateway.quota.connection_states(self.clock.now())  # type: ignore[union-attr]
            if any(w.name == "5h" and w.used_percent == 100 for w in states[self.name].windows):
                return
            assert time.monotonic() < deadline, f"no usage read found {self.name}'s 5h spent"
            time.sleep(0.02)

    def reset_of(self) -> float:
        """When the gateway knows the plan's spent 5-hour window resets (its first usage
        read runs in the background, so it is waited for)."""
        deadline = time.monotonic() + 5
        while True:
            states = self.gateway.quota.connection_states(self.clock.now())  # type: ignore[union-attr]
            resets = [w.resets_at for w in states[self.name].windows if w.name == "5h"]
            if resets and resets[0] is not None:
                return resets[0]
            assert time.monotonic() < deadline, f"the gateway knows no 5h reset of {self.name}"
            time.sleep(0.02)


@pytest.fixture(params=sorted(PLANS))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    name = request.param
    with _running(name, _plan_scenario(PLANS[name]), tmp_path) as running:
        yield running


@contextmanager
def _running(name: str, scenario: Scenario, tmp_path: Path) -> Iterator[World]:
    plan = PLANS[name]
    clock = FakeClock(START)
    sim = SimUpstream(scenario, clock)
    cheap = SimUpstream(_cheap(), clock)
    (tmp_path / "plan").write_text(sim.scenario.auth.token or "")
    (tmp_path / "cheap").write_text(CHEAP_KEY)
    with sim, cheap:
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                # The usage endpoint is read at start and after each reset, as in service:
                # Kimi's spent-plan 403 names no reset, the last reading gives it.
                "quota": {"poll_interval_s": 300},
                "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
                "connections": [
                    {
                        "id": name,
                        "provider": plan.provider,
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "plan")},
                        "base_url": f"{sim.url}{plan.path}",
                        "models": [plan.model],
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
                name, plan, clock, sim, cheap, gateway, server.url, tmp_path / "ledger.sqlite3"
            )


def _ledger_matches_tallies(world: World) -> None:
    world.gateway.ledger.flush()
    rows = read_rows(world.ledger, limit=1000)
    for connection_id, sim in ((world.name, world.sim), ("cheap", world.cheap)):
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
    assert served
    assert set(served) == {world.name}
    assert refused.status_code == 429
    assert world.cheap.requests == []
    # The plan was verified on its usage endpoint before it served, at its own API.
    assert world.sim.requests[0].path == world.plan.usage_path
    served_at = {r.path for r in world.sim.requests if r.path != world.plan.usage_path}
    assert served_at == {world.plan.path + world.plan.generation}
    # The spent window is known with the reset the plan reported.
    assert world.reset_of() == pytest.approx(START + FIVE_HOURS, abs=2)
    _ledger_matches_tallies(world)


def test_thrifty_climbs_to_the_cheap_rung_and_comes_back_after_the_reset(world: World) -> None:
    served = [world.send("auto/thrifty") for _ in range(10)]
    first_cheap = served.index("cheap")
    assert first_cheap > 0
    assert served[:first_cheap] == [world.name] * first_cheap
    assert served[first_cheap:] == ["cheap"] * (10 - first_cheap)
    world.clock.set(world.reset_of())
    assert world.send("auto/thrifty") == world.name
    _ledger_matches_tallies(world)


def test_an_openai_client_is_served_from_the_plan(world: World) -> None:
    client = openai.OpenAI(base_url=f"{world.url}/v1", api_key="unused", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=world.plan.model, messages=HELLO, max_tokens=64
    )
    assert raw.headers["x-rungway-connection"] == world.name
    assert raw.parse().choices[0].message.content
    _ledger_matches_tallies(world)


def test_kimi_with_a_booster_wallet_never_serves_subscription(tmp_path: Path) -> None:
    # The wallet pays for requests past the plan's windows: a plan that bills past its
    # quota is metered, whatever its windows say, and stays out of auto/subscription.
    scenario = _plan_scenario(PLANS["kimi"]).model_copy(
        update={"kimi": KimiSpec(booster_cents=350.0)}
    )
    with _running("kimi", scenario, tmp_path) as world:
        with pytest.raises(anthropic.APIStatusError) as refused:
            world.send("auto/subscription")
        assert refused.value.status_code in (429, 503)
        assert world.sim.tally.total().requests == 0
        # Past its spent window the wallet would keep it serving, billed: once the next
        # usage read shows the window spent, thrifty moves on to the cheap rung instead.
        world.sim.set_window_used("5h", PLANS["kimi"].capacity)
        world.clock.advance(301)
        world.wait_for_spent_window()
        assert world.send("auto/thrifty") == "cheap"
        assert world.sim.tally.total().requests == 0
        _ledger_matches_tallies(world)


def test_a_client_kimi_refuses_goes_on_to_the_next_rung_and_leaves_the_plan_open(
    tmp_path: Path,
) -> None:
    # The Kimi clients' device headers pass through; the service refuses this platform
    # with a 403 that is a terms refusal, not a spent plan: no cooldown for other clients.
    with _running("kimi", _plan_scenario(PLANS["kimi"]), tmp_path) as world:
        assert world.send("auto/thrifty", {"x-msh-platform": "kimi_code_cli"}) == "cheap"
        refused = world.sim.requests[-1]
        assert refused.path == "/coding/v1/messages"
        assert refused.header("x-msh-platform") == "kimi_code_cli"
        assert world.send("auto/thrifty") == "kimi"
        _ledger_matches_tallies(world)
