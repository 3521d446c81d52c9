"""Both Gemini upstreams through a live gateway, and the ladder across them.

The simulated Gemini API (a free-tier key) and Gemini Code Assist (a Gemini CLI login)
run on loopback with the gateway's own controllable clock. Clients speak OpenAI Chat, so
every request is translated to the Gemini API and back; Code Assist's envelope is the
adapter's business, and its project is found with `loadCodeAssist` at start.

The ladder: the Code Assist plan on rung 0, the free-tier key on rung 2 (its provider's
tier set to `free`), a metered key on rung 3. `auto/thrifty` serves from the plan until its
daily quota is spent, then from the free tier (at $0, with the list price it would have
cost), then from the paid rung once the free tier is spent too, and from the plan again
the moment the clock passes the plan's reset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import types
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam

from rungway.app import build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream, builtin_scenario, load_scenario

START = 1_790_000_000.0
FLASH = "gemini-2.5-flash"
DEEPSEEK = "deepseek-chat"
CHEAP_KEY = "sk-gemini-ladder-cheap"
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello."}]


def _cheap() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "cheap",
            "api": "openai",
            "auth": {"kind": "bearer", "token": CHEAP_KEY},
            "models": [{"id": DEEPSEEK}],
            "response": {"output_tokens": 12},
        }
    )


@dataclass
class World:
    clock: FakeClock
    plan: SimUpstream
    free: SimUpstream
    cheap: SimUpstream
    url: str
    ledger: Path
    flush: Any

    def client(self) -> OpenAI:
        return OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0)

    def gemini(self) -> genai.Client:
        """The official Gemini SDK, pointed at the gateway's Gemini ingress."""
        options = types.HttpOptions(base_url=self.url, api_version="v1beta")
        return genai.Client(api_key="unused", http_options=options)

    def send(self, model: str) -> httpx.Response:
        body = {"model": model, "messages": HELLO, "max_tokens": 512}
        return httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=30)

    def served_by(self, model: str = "auto/thrifty") -> str:
        response = self.send(model)
        assert response.status_code == 200, response.text
        return response.headers["x-rungway-connection"]

    def generations(self, sim: SimUpstream) -> list[str]:
        """The paths of `sim`'s generation requests (its setup and quota calls left out)."""
        return [r.path for r in sim.requests if "Content" in r.path]

    def plan_reset(self) -> float:
        """When the gateway holds the plan's spent window to reset."""
        response = httpx.get(f"{self.url}/admin/connections")
        response.raise_for_status()
        entry = next(e for e in response.json()["connections"] if e["id"] == "plan")
        (window,) = [w for w in entry["windows"] if w["status"] == "rejected"]
        assert window["model"] == FLASH
        return float(window["resets_at"])

    def rows(self) -> list[dict[str, Any]]:
        """Ledger rows, oldest first."""
        self.flush()
        return list(reversed(read_rows(self.ledger)))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    clock = FakeClock(START)
    plan_scenario = load_scenario(builtin_scenario("gemini-code-assist"))
    free_scenario = load_scenario(builtin_scenario("gemini-api"))
    assert plan_scenario.auth is not None
    assert free_scenario.auth is not None
    plan_token, free_key = plan_scenario.auth.token, free_scenario.auth.token
    with (
        SimUpstream(plan_scenario, clock) as plan,
        SimUpstream(free_scenario, clock) as free,
        SimUpstream(_cheap(), clock) as cheap,
    ):
        for name, secret in (("plan", plan_token), ("free", free_key), ("cheap", CHEAP_KEY)):
            (tmp_path / name).write_text(secret or "")

        def connection(cid: str, provider: str, auth: str, base_url: str, model: str) -> Any:
            return {
                "id": cid,
                "provider": provider,
                "auth": auth,
                "credential": {"file": str(tmp_path / cid)},
                "base_url": base_url,
                "models": [model],
                # These tests reach the plan from SDKs, not the Gemini CLI its terms name:
                # widened on purpose (the simulated Code Assist does not check the client).
                **({"clients": "any"} if auth == "oauth" else {}),
            }

        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"cheap": 10, "premium": 10}},
                # A free-tier key: its models sit on the free rung and cost nothing.
                "tiers": {"providers": {"gemini": "free"}},
                "connections": [
                    connection(
                        "plan", "gemini-code-assist", "oauth", f"{plan.url}/v1internal", FLASH
                    ),
                    connection("free", "gemini", "apikey", f"{free.url}/v1beta", FLASH),
                    connection("cheap", "deepseek", "apikey", f"{cheap.url}/v1", DEEPSEEK),
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(
                clock,
                plan,
                free,
                cheap,
                server.url,
                tmp_path / "ledger.sqlite3",
                gateway.ledger.flush,
            )


@pytest.mark.parametrize("connection", ["plan", "free"])
def test_a_reply_comes_back_translated_with_its_usage_in_the_ledger(
    world: World, connection: str
) -> None:
    reply = world.client().chat.completions.create(
        model=f"{connection}/{FLASH}", messages=HELLO, max_tokens=512
    )
    assert reply.choices[0].message.content
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.completion_tokens > 0
    (row,) = world.rows()
    assert (row["connection_id"], row["outcome"], row["status"]) == (connection, "ok", 200)
    assert row["stream"] == 0
    assert row["input_tokens"] > 0
    assert row["output_tokens"] == reply.usage.completion_tokens
    sim = world.plan if connection == "plan" else world.free
    (path,) = world.generations(sim)
    assert path.endswith(":generateContent")


@pytest.mark.parametrize("connection", ["plan", "free"])
def test_a_stream_comes_back_translated_with_its_usage_in_the_ledger(
    world: World, connection: str
) -> None:
    stream = world.client().chat.completions.create(
        model=f"{connection}/{FLASH}",
        messages=HELLO,
        max_tokens=512,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["stop"]
    usage = next(c.usage for c in chunks if c.usage is not None)
    (row,) = world.rows()
    assert (row["connection_id"], row["outcome"], row["stream"]) == (connection, "ok", 1)
    assert row["output_tokens"] == usage.completion_tokens > 0
    assert row["input_tokens"] > 0
    sim = world.plan if connection == "plan" else world.free
    (path,) = world.generations(sim)
    assert path.endswith(":streamGenerateContent")


def test_the_plan_names_the_project_it_found_at_start(world: World) -> None:
    assert world.served_by(f"plan/{FLASH}") == "plan"
    setup = [r.path for r in world.plan.requests if r.path.endswith("loadCodeAssist")]
    assert len(setup) == 1, "the project is found once, at start"
    assert world.served_by(f"plan/{FLASH}") == "plan"
    assert len([r for r in world.plan.requests if r.path.endswith("loadCodeAssist")]) == 1


def test_the_free_tier_costs_nothing_but_shows_its_list_price(world: World) -> None:
    assert world.served_by(f"free/{FLASH}") == "free"
    (row,) = world.rows()
    assert row["rung"] == "free"
    assert row["cost_usd"] == 0
    assert row["list_cost_usd"] is not None
    assert row["list_cost_usd"] > 0


def test_the_ladder_goes_plan_free_paid_and_back_to_the_plan_at_its_reset(world: World) -> None:
    assert world.served_by() == "plan"
    # The plan's daily quota runs out (another client of the same login spent it).
    world.plan.set_window_used("flash-requests-per-day", 1000)
    assert world.served_by() == "free", "the plan's 429 moved the request on"
    assert world.served_by() == "free"
    assert len(world.generations(world.plan)) == 2, "the spent plan is not asked again"
    # The free tier's daily quota runs out too.
    world.free.set_window_used("flash-rpd", 250)
    assert world.served_by() == "cheap", "the free tier's 429 moved the request on"
    assert world.served_by() == "cheap"
    assert len(world.generations(world.free)) == 3
    # Until the reset the plan's 429 named, the plan is left alone; by then the free tier's
    # day has ended (at midnight Pacific, earlier), so it serves. Past the reset, the plan.
    reset = world.plan_reset()
    world.clock.advance(reset - world.clock.now() - 5)
    assert world.served_by() == "free"
    world.clock.advance(6)
    assert world.served_by() == "plan"
    rungs = [(row["connection_id"], row["rung"], row["cost_usd"] > 0) for row in world.rows()]
    assert rungs == [
        ("plan", "subscription", False),
        ("free", "free", False),
        ("free", "free", False),
        ("cheap", "cheap", True),
        ("cheap", "cheap", True),
        ("free", "free", False),
        ("plan", "subscription", False),
    ]


@pytest.mark.parametrize("connection", ["plan", "free"])
def test_the_gemini_sdk_reaches_either_upstream_in_its_own_api(
    world: World, connection: str
) -> None:
    # Same API both sides: the Gemini API's reply passes as it came, Code Assist's comes
    # out of its envelope.
    client = world.gemini()
    config = types.GenerateContentConfig(max_output_tokens=512)
    reply = client.models.generate_content(
        model=f"{connection}/{FLASH}", contents="Say hello.", config=config
    )
    assert reply.text
    assert reply.usage_metadata is not None
    assert reply.usage_metadata.candidates_token_count
    chunks = list(
        client.models.generate_content_stream(
            model=f"{connection}/{FLASH}", contents="Say hello.", config=config
        )
    )
    assert "".join(chunk.text or "" for chunk in chunks)
    last = chunks[-1]
    assert last.candidates is not None
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None
    first, streamed = world.rows()
    assert (first["connection_id"], first["api"], first["stream"]) == (connection, "gemini", 0)
    assert (streamed["connection_id"], streamed["stream"]) == (connection, 1)
    assert first["output_tokens"] == reply.usage_metadata.candidates_token_count + (
        reply.usage_metadata.thoughts_token_count or 0
    )
    assert streamed["output_tokens"] == (last.usage_metadata.candidates_token_count or 0) + (
        last.usage_metadata.thoughts_token_count or 0
    )
    counted = client.models.count_tokens(model=f"{connection}/{FLASH}", contents="Count me.")
    assert counted.total_tokens
    sim = world.plan if connection == "plan" else world.free
    assert any(r.path.endswith(":countTokens") for r in sim.requests)


def test_the_ladder_serves_the_gemini_sdk_too(world: World) -> None:
    client = world.gemini()
    config = types.GenerateContentConfig(max_output_tokens=512)

    def served() -> str:
        reply = client.models.generate_content(
            model="auto/thrifty", contents="Say hello.", config=config
        )
        assert reply.text
        return str(world.rows()[-1]["connection_id"])

    assert served() == "plan"
    world.plan.set_window_used("flash-requests-per-day", 1000)
    assert served() == "free"
    world.free.set_window_used("flash-rpd", 250)
    assert served() == "cheap"
    world.clock.advance(world.plan_reset() - world.clock.now() + 1)
    assert served() == "plan"


def test_a_spent_free_tier_minute_steps_past_the_model_until_the_minute_is_over(
    world: World,
) -> None:
    assert world.served_by(f"free/{FLASH}") == "free"
    world.free.set_window_used("flash-rpm", 10)
    # Named for the key, the model has nowhere else to go: the 429 says when to retry.
    refused = world.send(f"free/{FLASH}")
    assert refused.status_code == 429, refused.text
    assert 0 < float(refused.headers["retry-after"]) <= 60
    # The ladder steps past the spent minute without asking the key again.
    world.plan.set_window_used("flash-requests-per-day", 1000)
    assert world.served_by() == "cheap"
    assert len(world.generations(world.free)) == 2
    world.clock.advance(61)
    world.free.set_window_used("flash-rpm", 0)
    assert world.served_by(f"free/{FLASH}") == "free"
