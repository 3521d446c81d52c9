"""The replayed ladder and the served one make the same decision, request by request.

One trace is sent through a live gateway, in front of simulated upstreams on a shared
controllable clock (a Claude plan whose 5 h and weekly windows fill and reset, an Anthropic
key, a cheap DeepSeek key), and replayed by `rungway whatif`'s ladder with the same plan
windows. Each request's connection must match: leaving the plan at its cut-off, falling
through on its 429, resting until the reset, and coming back at it.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from rungway.app import build_gateway
from rungway.clock import FakeClock
from rungway.config import Settings, parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.pricing import PriceBook
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from rungway.whatif.outcome import World
from rungway.whatif.plans import PlanQuota, PlanWindow
from rungway.whatif.policies import LadderPolicy
from rungway.whatif.trace import Trace, TraceRequest
from tests.integration.conftest import CLAUDE_CODE_HEADERS

START = 1_790_000_000.0
HOUR = 3600.0
PLAN_TOKEN = "sk-ant-oat01-whatif-plan"
API_KEY = "sk-ant-api03-whatif-key"
CHEAP_KEY = "sk-whatif-cheap"
CLAUDE = "claude-sonnet-4-5"
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
# The plan's windows, on the simulated upstream and in the replay alike: 6 requests an
# hour, and 20 per four hours (the "weekly" window, short so a trace crosses its reset).
SESSION = (HOUR, 6)
WEEK = (4 * HOUR, 20)


def _scenario(name: str, api: str, headers: str, auth: dict[str, str], model: str) -> Scenario:
    windows = [
        {
            "name": "5h",
            "claim": "five_hour",
            "unit": "requests",
            "capacity": SESSION[1],
            "length_s": SESSION[0],
        },
        {
            "name": "7d",
            "claim": "seven_day",
            "unit": "requests",
            "capacity": WEEK[1],
            "length_s": WEEK[0],
        },
    ]
    return Scenario.model_validate(
        {
            "name": name,
            "api": api,
            "quota_headers": headers,
            "auth": auth,
            "models": [{"id": model, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": windows if headers == "anthropic-unified" else [],
            "response": {"output_tokens": 8, "chunk_tokens": 4},
        }
    )


@pytest.fixture
def upstreams() -> Iterator[tuple[FakeClock, dict[str, SimUpstream]]]:
    clock = FakeClock(START)
    plan = _scenario(
        "plan", "anthropic", "anthropic-unified", {"kind": "bearer", "token": PLAN_TOKEN}, CLAUDE
    )
    api = _scenario(
        "api", "anthropic", "anthropic-apikey", {"kind": "x-api-key", "token": API_KEY}, CLAUDE
    )
    cheap = _scenario(
        "cheap", "openai", "openai", {"kind": "bearer", "token": CHEAP_KEY}, "deepseek-chat"
    )
    with (
        SimUpstream(plan, clock) as plan_sim,
        SimUpstream(api, clock) as api_sim,
        SimUpstream(cheap, clock) as cheap_sim,
    ):
        yield clock, {"plan": plan_sim, "api": api_sim, "cheap": cheap_sim}


def _settings(tmp_path: Path, sims: dict[str, SimUpstream]) -> Settings:
    connections = []
    for connection_id, provider, auth, secret, model, suffix in (
        ("plan", "anthropic", "oauth", PLAN_TOKEN, CLAUDE, ""),
        ("api", "anthropic", "apikey", API_KEY, CLAUDE, ""),
        ("cheap", "deepseek", "apikey", CHEAP_KEY, "deepseek-chat", "/v1"),
    ):
        (tmp_path / connection_id).write_text(secret)
        connections.append(
            {
                "id": connection_id,
                "provider": provider,
                "auth": auth,
                "credential": {"file": str(tmp_path / connection_id)},
                "base_url": sims[connection_id].url + suffix,
                "models": [model],
            }
        )
    return parse_settings(
        {
            "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
            "quota": {"poll_interval_s": 0},
            "ladder": {"rung_budget_usd": {"cheap": None, "premium": None}},
            "connections": connections,
        }
    )


def _trace() -> Trace:
    """Irregular arrivals over ten hours; one request in six names the model itself."""
    rng = random.Random(17)
    at, made = START + 5, []
    for index in range(90):
        model = CLAUDE if index % 6 == 5 else "auto/thrifty"
        made.append(TraceRequest(at, model, "anthropic_messages", 12, 8))
        at += rng.choice((30.0, 90.0, 240.0, 600.0, 1500.0))
    return tuple(made)


def _served(settings: Settings, clock: FakeClock, trace: Trace) -> list[str]:
    gateway = build_gateway(settings, read_secrets(settings), clock=clock)
    served = []
    with (
        BackgroundServer(uvicorn_config(gateway.app), "gateway") as server,
        # The trace stands for Claude Code's traffic, which the plan's terms allow.
        anthropic.Anthropic(
            base_url=server.url,
            api_key="unused",
            max_retries=0,
            default_headers=CLAUDE_CODE_HEADERS,
        ) as claude,
    ):
        for request in trace:
            clock.set(request.at)
            raw = claude.messages.with_raw_response.create(
                model=request.model, max_tokens=16, messages=HELLO
            )
            served.append(raw.headers["x-rungway-connection"])
    return served


def test_the_replayed_ladder_decides_as_the_served_one(
    tmp_path: Path, upstreams: tuple[FakeClock, dict[str, SimUpstream]]
) -> None:
    clock, sims = upstreams
    settings = _settings(tmp_path, sims)
    trace = _trace()
    served = _served(settings, clock, trace)
    plan = PlanQuota(
        "plan",
        (
            PlanWindow("5h", SESSION[0], SESSION[1], "requests", "fixed", anchor=START),
            PlanWindow("7d", WEEK[0], WEEK[1], "requests", "fixed", anchor=START),
        ),
    )
    world = World(settings, {"plan": plan}, PriceBook(settings.prices))
    replayed = [
        p.connection_id for p in LadderPolicy().run(trace, world, lambda n: None).placements
    ]
    assert replayed == served
    # The trace exercises every move: the plan, the cheap rung, the key for the named model,
    # and returns to the plan after resets.
    assert {"plan", "cheap", "api"} <= set(served)
    returns = sum(1 for a, b in itertools.pairwise(served) if a != "plan" == b)
    assert returns >= 3
