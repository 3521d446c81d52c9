"""Rung budgets under concurrency, and costs that add up, through the real gateway.

64 requests race for a cheap rung whose budget fits a handful of worst cases. Settled
spend never passes the budget by more than one request's ceiling, the requests that do not
fit are served by the premium rung, and the ledger's costs equal what the simulated
upstreams' own token tallies cost at list price.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from rungway.app import Gateway, build_gateway
from rungway.budget import cost_ceiling
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.pricing import TokenCounts, rates_for
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream

CHEAP, PREMIUM = "gpt-4.1-mini", "gpt-4.1"
BUDGET = 0.0005
MAX_TOKENS = 50
HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _scenario(name: str, model: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": "openai",
            "auth": {"kind": "bearer", "token": f"sk-{name}"},
            "models": [{"id": model}],
            # Paced, so the racing requests overlap at the upstream.
            "response": {"output_tokens": 40, "chunk_tokens": 8, "first_byte_ms": 30},
        }
    )


@dataclass
class World:
    cheap: SimUpstream
    premium: SimUpstream
    gateway: Gateway
    url: str
    ledger: Path


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    cheap, premium = (
        SimUpstream(_scenario("cheap", CHEAP)),
        SimUpstream(_scenario("premium", PREMIUM)),
    )
    with cheap, premium:
        connections = []
        for sim, model in ((cheap, CHEAP), (premium, PREMIUM)):
            (tmp_path / sim.scenario.name).write_text(f"sk-{sim.scenario.name}")
            connections.append(
                {
                    "id": sim.scenario.name,
                    "provider": "openai",
                    "auth": "apikey",
                    "credential": {"file": str(tmp_path / sim.scenario.name)},
                    "base_url": f"{sim.url}/v1",
                    "models": [model],
                }
            )
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                # Premium without a limit: what the cheap budget cannot take moves up to it.
                "ladder": {"rung_budget_usd": {"cheap": BUDGET, "premium": None}},
                "connections": connections,
            }
        )
        gateway = build_gateway(settings, read_secrets(settings))
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield World(cheap, premium, gateway, server.url, tmp_path / "ledger.sqlite3")


def _send(url: str, stream: bool) -> str:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
        if stream:
            with client.chat.completions.with_streaming_response.create(
                model="auto/thrifty", messages=HELLO, max_tokens=MAX_TOKENS, stream=True
            ) as response:
                response.read()
                return response.headers["x-rungway-rung"]
        raw = client.chat.completions.with_raw_response.create(
            model="auto/thrifty", messages=HELLO, max_tokens=MAX_TOKENS
        )
        return raw.headers["x-rungway-rung"]


def _list_cost(model: str, sim: SimUpstream) -> float:
    rates = rates_for("openai", model)
    assert rates is not None
    total = sim.tally.total()
    return rates.cost(TokenCounts(total.input_tokens, total.output_tokens))


def test_64_racing_requests_never_overshoot_the_cheap_rungs_budget(world: World) -> None:
    body = {"model": "auto/thrifty", "messages": HELLO, "max_tokens": MAX_TOKENS}
    ceiling = cost_ceiling("openai", CHEAP, body, 90)
    assert 4 < BUDGET / ceiling < 20, "the budget fits a handful of worst cases"
    with ThreadPoolExecutor(max_workers=64) as pool:
        rungs = list(pool.map(lambda i: _send(world.url, i % 2 == 0), range(64)))
    assert rungs.count("cheap") + rungs.count("premium") == 64
    assert rungs.count("premium") > 0, "requests that could not fit moved up a rung"
    assert rungs.count("cheap") >= 5

    world.gateway.ledger.flush()
    rows = read_rows(world.ledger, limit=1000)
    assert len(rows) == 64
    cheap_spend = sum(row["cost_usd"] for row in rows if row["rung"] == "cheap")
    assert cheap_spend <= BUDGET + ceiling
    # The ledger's costs are what the upstreams' own tallies cost at list price.
    assert cheap_spend == pytest.approx(_list_cost(CHEAP, world.cheap), abs=1e-9)
    premium_spend = sum(row["cost_usd"] for row in rows if row["rung"] == "premium")
    assert premium_spend == pytest.approx(_list_cost(PREMIUM, world.premium), abs=1e-9)
    assert all(row["list_cost_usd"] == pytest.approx(row["cost_usd"]) for row in rows)
    assert world.cheap.tally.total().requests == rungs.count("cheap")
