"""Waits that tell the truth, through the real gateway on loopback in front of a simulated
Claude plan and an API key: a request held for the plan's reset instead of paying or
refusing, no `quota_stale` at the reset, and a `Retry-After` that is the earliest moment
any route could serve.

The gateway and the simulated upstreams share one clock that runs with the wall clock
and that a test can jump forward, so a 5-hour window ends in an instant while an SDK's
real sleep still moves it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from rungway.app import Gateway, build_gateway
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.engine.waiting import WAKE_MARGIN_S
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE_CODE_HEADERS

START = 1_790_000_000.0
SUBSCRIPTION_TOKEN = "sk-ant-oat01-waits-plan"
API_KEY = "sk-ant-api03-waits-key"
MODEL = "claude-sonnet-4-5"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


class RunningClock:
    """A clock that runs with the wall clock from `START`, and jumps when told."""

    def __init__(self) -> None:
        self._offset = START - time.monotonic()
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._offset + time.monotonic()

    def jump_to(self, instant: float) -> None:
        with self._lock:
            self._offset = instant - time.monotonic()


@dataclass
class World:
    clock: RunningClock
    plan: SimUpstream
    api: SimUpstream
    gateway: Gateway
    url: str
    ledger: Path

    def claude(self, **options: Any) -> anthropic.Anthropic:
        options.setdefault("max_retries", 0)
        return anthropic.Anthropic(
            base_url=self.url, api_key="unused", default_headers=CLAUDE_CODE_HEADERS, **options
        )

    def send(self, model: str = "auto/thrifty") -> httpx.Response:
        return httpx.post(
            f"{self.url}/v1/messages",
            json={"model": model, "max_tokens": 64, "messages": HELLO},
            headers={**CLAUDE_CODE_HEADERS, "x-api-key": "unused"},
            timeout=30,
        )

    def exhaust_plan(self) -> float:
        """Spend the plan's 5h window through its named model; its reset instant."""
        for _ in range(20):
            if self.send(f"plan/{MODEL}").status_code == 429:
                break
        else:
            pytest.fail("the plan's 5h window never filled")
        return self.reset()

    def reset(self) -> float:
        state = self.gateway.quota.connection_states(self.clock.now())["plan"]  # type: ignore[union-attr]
        reset = next(w.resets_at for w in state.windows if w.name == "5h")
        assert reset is not None
        return reset

    def rows(self) -> list[dict[str, Any]]:
        self.gateway.ledger.flush()
        return read_rows(self.ledger)

    def messages_sent(self, sim: SimUpstream) -> int:
        return sum(1 for request in sim.requests if request.path == "/v1/messages")


def _plan() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "waits-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_TOKEN, "clients": "any"},
            "models": [{"id": MODEL}],
            "windows": [
                # About six requests of ~35 tokens each fill the 5h window.
                {"name": "5h", "claim": "five_hour", "capacity": 200, "length_s": 5 * 3600.0},
                {"name": "7d", "claim": "seven_day", "capacity": 100000, "length_s": 604800},
            ],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


def _api() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "waits-api",
            "api": "anthropic",
            "quota_headers": "anthropic-apikey",
            "auth": {"kind": "x-api-key", "token": API_KEY},
            "models": [{"id": MODEL}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


MakeWorld = Callable[..., World]


@pytest.fixture
def make_world(tmp_path: Path) -> Iterator[MakeWorld]:
    """A world with `ladder:` settings of the test's own (`max_wait_s` and the premium
    rung's budget, None for none)."""
    stack: list[Any] = []

    def make(*, max_wait_s: float = 5.0, premium_usd: float | None = None) -> World:
        clock = RunningClock()
        plan, api = SimUpstream(_plan(), clock), SimUpstream(_api(), clock)
        for each in (plan, api):
            each.start()
            stack.append(each)
        (tmp_path / "plan").write_text(SUBSCRIPTION_TOKEN)
        (tmp_path / "api").write_text(API_KEY)
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "ladder": {"rung_budget_usd": {"premium": premium_usd}, "max_wait_s": max_wait_s},
                "connections": [
                    {
                        "id": "plan",
                        "provider": "anthropic",
                        "auth": "oauth",
                        "credential": {"file": str(tmp_path / "plan")},
                        "base_url": plan.url,
                        "models": [MODEL],
                        "clients": "any",
                    },
                    {
                        "id": "api",
                        "provider": "anthropic",
                        "auth": "apikey",
                        "credential": {"file": str(tmp_path / "api")},
                        "base_url": api.url,
                        "models": [MODEL],
                    },
                ],
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        server = BackgroundServer(uvicorn_config(gateway.app), "gateway")
        url = server.start()
        stack.append(server)
        return World(clock, plan, api, gateway, url, tmp_path / "ledger.sqlite3")

    yield make
    for each in reversed(stack):
        each.stop()


def _in_background(call: Callable[[], httpx.Response]) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as error:  # the test reads it
            result.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


# --- Waits that beat paying ------------------------------------------------------------------


def test_thrifty_holds_a_request_for_a_plan_reset_within_max_wait_and_pays_nothing(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=5.0)
    reset = world.exhaust_plan()
    plan_before = world.messages_sent(world.plan)
    world.clock.jump_to(reset - 3.0)
    thread, result = _in_background(world.send)
    thread.join(timeout=20)
    (response,) = result
    assert response.status_code == 200, response.text
    assert response.headers["x-rungway-connection"] == "plan"
    assert world.api.requests == [], "the paid key was never asked"
    assert world.messages_sent(world.plan) == plan_before + 1
    (row,) = [r for r in world.rows() if (r["plan"] or {}).get("waited_s")]
    assert (row["connection_id"], row["outcome"], row["cost_usd"]) == ("plan", "ok", 0.0)
    # Held from its arrival, a moment after the clock's jump, to the reset and the margin.
    assert 2.0 <= row["plan"]["waited_s"] <= 3.0 + WAKE_MARGIN_S + 0.5


def test_thrifty_pays_at_once_when_the_plan_resets_later_than_max_wait(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=5.0)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 30.0)
    started = time.monotonic()
    response = world.send()
    assert response.headers["x-rungway-connection"] == "api"
    assert time.monotonic() - started < 3.0, "a reset past max_wait_s is not waited for"
    assert "waited_s" not in world.rows()[0]["plan"]


def test_max_wait_zero_turns_waits_off(make_world: MakeWorld) -> None:
    world = make_world(max_wait_s=0.0)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 3.0)
    response = world.send()
    assert response.headers["x-rungway-connection"] == "api"
    assert "waited_s" not in world.rows()[0]["plan"]


def test_subscription_waits_for_the_reset_instead_of_refusing(make_world: MakeWorld) -> None:
    world = make_world(max_wait_s=5.0)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 2.0)
    response = world.send("auto/subscription")
    assert response.status_code == 200, response.text
    assert response.headers["x-rungway-connection"] == "plan"
    assert world.api.requests == []
    (row,) = [r for r in world.rows() if (r["plan"] or {}).get("waited_s")]
    assert (row["connection_id"], row["outcome"]) == ("plan", "ok")
    # The usage endpoint states its reset to the whole second, so the hold may be shorter.
    assert row["plan"]["waited_s"] >= 1.0


def test_a_client_that_hangs_up_while_held_leaves_nothing_behind(make_world: MakeWorld) -> None:
    world = make_world(max_wait_s=5.0)
    reset = world.exhaust_plan()
    rows_before = len(world.rows())
    plan_before = world.messages_sent(world.plan)
    world.clock.jump_to(reset - 4.5)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{world.url}/v1/messages",
            json={"model": "auto/thrifty", "max_tokens": 64, "messages": HELLO},
            headers={**CLAUDE_CODE_HEADERS, "x-api-key": "unused"},
            timeout=httpx.Timeout(5.0, read=0.5),
        )
    # Past the reset: had the hold outlived its client, it would now be served and recorded.
    time.sleep(4.5 + WAKE_MARGIN_S + 1.5)
    assert len(world.rows()) == rows_before, "a request whose client left is not recorded"
    assert world.api.requests == []
    assert world.messages_sent(world.plan) == plan_before


# --- No quota_stale at a reset ---------------------------------------------------------------


def test_the_first_subscription_request_after_the_reset_is_served_not_stale(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=0.0)
    reset = world.exhaust_plan()
    # A refusal just before the reset reads the plan's usage, leaving a fresh 7d reading
    # beside the spent 5h one, as a plan in steady use has: at the reset only the 5h
    # reading is past its reset.
    world.clock.jump_to(reset - 10.0)
    assert world.send("auto/subscription").status_code == 429
    world.clock.jump_to(reset + 0.5)
    response = world.send("auto/subscription")
    assert response.status_code == 200, response.text
    assert response.headers["x-rungway-connection"] == "plan"
    assert world.rows()[0]["outcome"] == "ok"


# --- Retry-After is the earliest route, x-should-retry past a minute --------------------------


def test_a_budget_refusal_names_the_plans_sooner_reset_and_tells_sdks_not_to_sleep(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=5.0, premium_usd=0.000001)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 144.0)
    response = world.send()
    assert response.status_code == 429
    assert response.json()["error"]["type"] == "rate_limit_error"
    assert 143 <= int(response.headers["retry-after"]) <= 144
    assert 143_000 <= int(response.headers["retry-after-ms"]) <= 144_100
    assert response.headers["x-should-retry"] == "false"
    assert "usable again sooner" in response.json()["error"]["message"]
    assert world.rows()[0]["outcome"] == "budget_exhausted"


def test_anthropic_sdk_at_default_retries_returns_a_long_refusal_at_once(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=0.0)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 105.0)
    client = world.claude(max_retries=anthropic.DEFAULT_MAX_RETRIES)
    started = time.monotonic()
    with pytest.raises(anthropic.RateLimitError) as refused:
        client.messages.create(model="auto/subscription", max_tokens=64, messages=HELLO)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, f"the SDK slept {elapsed:.1f}s on a refusal that said not to"
    stated = float(refused.value.response.headers["retry-after"])
    assert 104 <= stated <= 105
    assert "retry after" in str(refused.value)


def test_anthropic_sdk_at_default_retries_sleeps_the_short_wait_and_is_served(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=0.0)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 2.0)
    first = world.send("auto/subscription")
    assert first.status_code == 429
    assert "x-should-retry" not in first.headers
    stated = float(first.headers["retry-after-ms"]) / 1000
    world.clock.jump_to(reset - 2.0)
    client = world.claude(max_retries=anthropic.DEFAULT_MAX_RETRIES)
    started = time.monotonic()
    raw = client.messages.with_raw_response.create(
        model="auto/subscription", max_tokens=64, messages=HELLO
    )
    elapsed = time.monotonic() - started
    assert raw.headers["x-rungway-connection"] == "plan"
    assert elapsed <= stated + 1.5, f"slept {elapsed:.1f}s past a stated {stated:.1f}s wait"


def test_openai_sdk_at_default_retries_returns_a_long_refusal_at_once(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=0.0)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 90.0)  # under openai's own 120 s ceiling: it would sleep it
    client = openai.OpenAI(base_url=f"{world.url}/v1", api_key="unused")
    assert client.max_retries == openai.DEFAULT_MAX_RETRIES
    started = time.monotonic()
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(
            model="auto/subscription", messages=[{"role": "user", "content": "Say hello."}]
        )
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, f"the SDK slept {elapsed:.1f}s on a refusal that said not to"
    assert refused.value.response.headers["x-should-retry"] == "false"


def test_openai_sdk_at_default_retries_sleeps_the_short_wait_and_is_served(
    make_world: MakeWorld,
) -> None:
    world = make_world(max_wait_s=0.0)
    reset = world.exhaust_plan()
    world.clock.jump_to(reset - 2.0)
    client = openai.OpenAI(base_url=f"{world.url}/v1", api_key="unused")
    started = time.monotonic()
    raw = client.chat.completions.with_raw_response.create(
        model="auto/subscription", messages=[{"role": "user", "content": "Say hello."}]
    )
    elapsed = time.monotonic() - started
    assert raw.headers["x-rungway-connection"] == "plan"
    assert elapsed <= 2.0 + 1.5, f"slept {elapsed:.1f}s past a stated 2s wait"
