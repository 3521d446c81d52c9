"""The ladder through an Antigravity plan: the plan on rung 0 and a cheap key above it, all
simulated, through the real gateway and the Gemini and OpenAI SDKs.

The gateway and the simulated upstreams share one fake clock, so a 5-hour bucket passes in
an instant. Neither SDK is an Antigravity client, which the plan's terms name alone: the
connection is widened on purpose (`clients: any`), and the simulated Antigravity is told
not to check its client. The project is found with Antigravity's `loadCodeAssist` at start,
and the plan is verified on `retrieveUserQuota` before `auto/subscription` uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from google import genai
from google.genai import errors, types
from openai import APIStatusError, OpenAI

from rungway.app import Gateway, build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream, builtin_scenario

START = 1_790_000_000.0
FIVE_HOURS = 5 * 3600.0
FLASH = "gemini-3-flash"
CHEAP_KEY = "sk-antigravity-ladder-cheap"
BUCKET = 3
"""Requests the plan's Flash bucket allows per five hours."""


def _plan(credits: dict[str, int] | None = None) -> Scenario:
    raw = yaml.safe_load(builtin_scenario("antigravity").read_text(encoding="utf-8"))
    raw["antigravity"] = {**raw["antigravity"], "clients": "any"}
    if credits is not None:
        raw["antigravity"]["credits"] = credits
    raw["windows"] = [
        {"name": "flash-5h", "unit": "requests", "capacity": BUCKET, "length_s": FIVE_HOURS}
        | {"model": FLASH}
    ]
    raw["response"] = {"output_tokens": 12, "chunk_tokens": 4}
    return Scenario.model_validate(raw)


def _cheap() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "antigravity-ladder-cheap",
            "api": "openai",
            "auth": {"kind": "bearer", "token": CHEAP_KEY},
            "models": [{"id": "deepseek-chat", "context_window": 64000}],
            "response": {"output_tokens": 12, "chunk_tokens": 4},
        }
    )


@dataclass
class World:
    clock: FakeClock
    plan: SimUpstream
    cheap: SimUpstream
    gateway: Gateway
    url: str
    ledger: Path

    def via_gemini(self, model: str) -> str:
        """One request from the Gemini SDK; the connection that served it."""
        options = types.HttpOptions(base_url=self.url, api_version="v1beta")
        client = genai.Client(api_key="unused", http_options=options)
        reply = client.models.generate_content(model=model, contents="Say hello.")
        assert reply.text
        response = reply.sdk_http_response
        assert response is not None
        assert response.headers is not None
        return response.headers["x-rungway-connection"]

    def via_openai(self, model: str) -> str:
        """One request from the OpenAI SDK; the connection that served it."""
        client = OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": "Say hello."}], max_tokens=64
        )
        return raw.headers["x-rungway-connection"]

    def plan_reset(self) -> float:
        """When the gateway holds the plan's spent bucket to reset."""
        response = httpx.get(f"{self.url}/admin/connections")
        entry = next(e for e in response.json()["connections"] if e["id"] == "plan")
        resets = [w["resets_at"] for w in entry["windows"] if w["status"] == "rejected"]
        assert resets, entry["windows"]
        return float(max(resets))


def _world(
    tmp_path: Path, plan_scenario: Scenario, *, credits: bool, clients: str = "any"
) -> Iterator[World]:
    clock = FakeClock(START)
    with SimUpstream(plan_scenario, clock) as plan, SimUpstream(_cheap(), clock) as cheap:
        (tmp_path / "plan").write_text(plan_scenario.auth.token or "")
        (tmp_path / "cheap").write_text(CHEAP_KEY)
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
                "connections": [
                    {
                        "id": "plan",
                        "provider": "antigravity",
                        "auth": "oauth",
                        "credential": {"file": str(tmp_path / "plan")},
                        "base_url": f"{plan.url}/v1internal",
                        "models": [FLASH],
                        # The SDKs are not Antigravity clients: widened on purpose.
                        "clients": clients,
                        "credits": credits,
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
            yield World(clock, plan, cheap, gateway, server.url, tmp_path / "ledger.sqlite3")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from _world(tmp_path, _plan(), credits=False)


def _ledger_matches_tallies(world: World) -> None:
    world.gateway.ledger.flush()
    rows = read_rows(world.ledger, limit=1000)
    for connection_id, sim in (("plan", world.plan), ("cheap", world.cheap)):
        served = [r for r in rows if r["connection_id"] == connection_id and r["outcome"] == "ok"]
        tally = sim.tally.total()
        assert len(served) == tally.requests, connection_id
        assert sum(r["input_tokens"] for r in served) == tally.input_tokens, connection_id
        assert sum(r["output_tokens"] for r in served) == tally.output_tokens, connection_id


SDKS = ["gemini", "openai"]


def _sender(world: World, sdk: str) -> Callable[[str], str]:
    return world.via_gemini if sdk == "gemini" else world.via_openai


@pytest.mark.parametrize("sdk", SDKS)
def test_subscription_uses_the_plan_and_refuses_once_its_bucket_is_spent(
    world: World, sdk: str
) -> None:
    send = _sender(world, sdk)
    served = [send("auto/subscription") for _ in range(BUCKET)]
    assert served == ["plan"] * BUCKET
    refused: Exception | None = None
    try:
        send("auto/subscription")
    except (errors.APIError, APIStatusError) as error:
        refused = error
    assert refused is not None
    assert getattr(refused, "code", None) == 429 or getattr(refused, "status_code", None) == 429
    assert world.cheap.requests == []
    paths = [r.path for r in world.plan.requests]
    assert paths[0] == "/v1internal:loadCodeAssist"
    assert "/v1internal:retrieveUserQuota" in paths
    # Every generation carried Antigravity's envelope fields.
    sent = [r.body for r in world.plan.requests if "Content" in r.path]
    assert all(b["userAgent"] == "antigravity" and b["requestType"] == "agent" for b in sent)
    _ledger_matches_tallies(world)


@pytest.mark.parametrize("sdk", SDKS)
def test_thrifty_climbs_to_the_cheap_rung_and_comes_back_after_the_reset(
    world: World, sdk: str
) -> None:
    send = _sender(world, sdk)
    served = [send("auto/thrifty") for _ in range(BUCKET + 3)]
    assert served[:BUCKET] == ["plan"] * BUCKET
    assert "cheap" in served[BUCKET:]
    assert set(served[BUCKET + 1 :]) == {"cheap"}
    world.clock.set(world.plan_reset())
    assert send("auto/thrifty") == "plan"
    _ledger_matches_tallies(world)


def test_a_plan_that_spends_credits_past_its_bucket_is_left_out_of_subscription(
    tmp_path: Path,
) -> None:
    scenario = _plan({"balance": 1000, "minimum": 50, "per_request": 10})
    for world in _world(tmp_path, scenario, credits=True):
        with pytest.raises(errors.APIError) as refused:
            world.via_gemini("auto/subscription")
        assert refused.value.code in (429, 503)
        assert world.plan.tally.total().requests == 0
        # auto/thrifty still uses it, and past the bucket the credits pay.
        served = [world.via_gemini("auto/thrifty") for _ in range(BUCKET + 1)]
        assert served == ["plan"] * (BUCKET + 1)
        last = world.plan.requests[-1].body
        assert last["enabledCreditTypes"] == ["GOOGLE_ONE_AI"]
        _ledger_matches_tallies(world)


def test_a_plan_kept_to_its_terms_never_sees_an_sdks_request(tmp_path: Path) -> None:
    for world in _world(tmp_path, _plan(), credits=False, clients="terms"):
        with pytest.raises(errors.APIError) as refused:
            world.via_gemini("auto/subscription")
        assert "terms: an Antigravity login serves Google's Antigravity clients only" in str(
            refused.value
        )
        assert world.via_openai("auto/thrifty") == "cheap"
        assert [r.path for r in world.plan.requests if "Content" in r.path] == []


AGY = "antigravity/cli/1.2.2 (aidev_client; os_type=linux; arch=amd64; auth_method=consumer)"


def _gemini_request(world: World, agent: str) -> httpx.Response:
    body = {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}
    return httpx.post(
        f"{world.url}/v1beta/models/auto/thrifty:generateContent",
        json=body,
        headers={"user-agent": agent, "x-goog-api-key": "unused"},
        timeout=30,
    )


def test_an_antigravity_client_is_served_by_a_plan_kept_to_its_terms(tmp_path: Path) -> None:
    login = _plan().antigravity
    assert login is not None
    checking = _plan().model_copy(
        update={"antigravity": login.model_copy(update={"clients": "antigravity"})}
    )
    for world in _world(tmp_path, checking, credits=False, clients="terms"):
        served = _gemini_request(world, AGY)
        assert served.status_code == 200, served.text
        assert served.headers["x-rungway-connection"] == "plan"
        (sent,) = [r for r in world.plan.requests if "Content" in r.path]
        assert sent.headers["user-agent"] == AGY
        assert world.via_gemini("auto/thrifty") == "cheap"


def test_a_widened_plan_whose_upstream_refuses_the_client_falls_through_without_resting(
    tmp_path: Path,
) -> None:
    login = _plan().antigravity
    assert login is not None
    checking = _plan().model_copy(
        update={"antigravity": login.model_copy(update={"clients": "antigravity"})}
    )
    for world in _world(tmp_path, checking, credits=False, clients="any"):
        assert world.via_gemini("auto/thrifty") == "cheap"
        entry = next(
            e
            for e in httpx.get(f"{world.url}/admin/connections").json()["connections"]
            if e["id"] == "plan"
        )
        assert entry["cooldown_until"] is None
        assert entry["breaker"] == "closed"
        assert not entry["disabled"]
        # Antigravity's own client still gets the plan.
        assert _gemini_request(world, AGY).headers["x-rungway-connection"] == "plan"
