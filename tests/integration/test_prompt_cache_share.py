"""Prompt caches through the gateway: a conversation's second turn on the same account
reads the account's cache (the SDK's usage shows it, the ledger records it, its cost uses
the cache price), the same turn on another account of the plan reads nothing, and the
spend report, `rungway spend` and the per-account view show each connection's share.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from typer.testing import CliRunner

from rungway.cli.main import app
from rungway.clock import FakeClock
from rungway.pricing.cost import TokenCounts, rates_for
from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE, CLAUDE_CODE_HEADERS, StartGateway

SYSTEM = "You are a careful coding agent working in a large repository. " * 120
GPT = "gpt-5"
LADDER = {"rung_budget_usd": {"cheap": None, "premium": None}, "pool_strategy": "fill_first"}


def _claude_account(name: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": f"sk-ant-oat01-cache-{name}"},
            "models": [{"id": CLAUDE}],
            "windows": [{"name": "5h", "claim": "five_hour", "capacity": 10**7, "length_s": 18000}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


def _openai_account(name: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": "openai",
            "quota_headers": "openai",
            "auth": {"kind": "bearer", "token": f"sk-cache-{name}"},
            "models": [{"id": GPT}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@dataclass
class Accounts:
    clock: FakeClock
    sims: dict[str, SimUpstream]
    connections: list[dict[str, Any]]


def _accounts(tmp_path: Path, scenarios: dict[str, Scenario], provider: str) -> Iterator[Accounts]:
    # The ledger stamps rows with the wall clock and the spend report reads the period
    # around the gateway's clock: the fake clock starts at the wall clock's now.
    clock = FakeClock(time.time())
    sims = {name: SimUpstream(scenario, clock) for name, scenario in scenarios.items()}
    for sim in sims.values():
        sim.start()
    try:
        connections = []
        for name, sim in sims.items():
            token = sim.scenario.auth.token
            assert token is not None
            (tmp_path / f"{name}.token").write_text(token)
            anthropic_side = provider == "anthropic"
            connections.append(
                {
                    "id": name,
                    "provider": provider,
                    "auth": "oauth" if anthropic_side else "apikey",
                    "credential": {"file": str(tmp_path / f"{name}.token")},
                    "base_url": sim.url if anthropic_side else f"{sim.url}/v1",
                    "models": [sim.scenario.models[0].id],
                }
            )
        yield Accounts(clock, sims, connections)
    finally:
        for sim in sims.values():
            sim.stop()


@pytest.fixture
def claude_pool(tmp_path: Path) -> Iterator[Accounts]:
    yield from _accounts(
        tmp_path, {name: _claude_account(name) for name in ("plan-a", "plan-b")}, "anthropic"
    )


@pytest.fixture
def openai_keys(tmp_path: Path) -> Iterator[Accounts]:
    yield from _accounts(
        tmp_path, {name: _openai_account(name) for name in ("key-a", "key-b")}, "openai"
    )


def _claude_turn(url: str, model: str, turns: list[str]) -> tuple[str, anthropic.types.Usage]:
    messages: list[Any] = []
    for index, turn in enumerate(turns):
        block: dict[str, Any] = {"type": "text", "text": turn}
        if index == len(turns) - 1:
            block["cache_control"] = {"type": "ephemeral"}
        messages.append({"role": "user" if index % 2 == 0 else "assistant", "content": [block]})
    headers = {**CLAUDE_CODE_HEADERS, "x-claude-code-session-id": "cache-session"}
    with anthropic.Anthropic(
        base_url=url, api_key="unused", max_retries=0, default_headers=headers
    ) as client:
        raw = client.messages.with_raw_response.create(
            model=model,
            max_tokens=32,
            system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            messages=messages,
        )
    return raw.headers["x-rungway-connection"], raw.parse().usage


def _list_cost(provider: str, model: str, row: dict[str, Any]) -> float:
    rates = rates_for(provider, model)
    assert rates is not None
    return rates.cost(
        TokenCounts(
            row["input_tokens"],
            row["output_tokens"],
            row["cache_read_tokens"],
            row["cache_write_tokens"],
        )
    )


def _uncached_cost(provider: str, model: str, row: dict[str, Any]) -> float:
    rates = rates_for(provider, model)
    assert rates is not None
    whole = row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
    return rates.cost(TokenCounts(whole, row["output_tokens"]))


def test_a_claude_conversation_reads_its_accounts_cache_and_not_another_accounts(
    claude_pool: Accounts, start_gateway: StartGateway
) -> None:
    gateway = start_gateway(
        clock=claude_pool.clock, connections=claude_pool.connections, ladder=LADDER
    )
    first_at, first = _claude_turn(gateway.url, "auto/subscription", ["Fix the failing test."])
    claude_pool.clock.advance(30)
    conversation = ["Fix the failing test.", "Patched the assertion.", "Now run the suite."]
    second_at, second = _claude_turn(gateway.url, "auto/subscription", conversation)
    assert first_at == second_at == "plan-a"
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation_input_tokens
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    # The same conversation sent to the plan's other account finds nothing cached there.
    elsewhere_at, elsewhere = _claude_turn(gateway.url, f"plan-b/{CLAUDE}", conversation)
    assert elsewhere_at == "plan-b"
    assert elsewhere.cache_read_input_tokens == 0
    assert second.cache_creation_input_tokens is not None
    assert elsewhere.cache_creation_input_tokens == (
        second.cache_read_input_tokens + second.cache_creation_input_tokens
    )

    rows = {(row["connection_id"], row["cache_read_tokens"] > 0): row for row in gateway.rows()}
    read_row = rows["plan-a", True]
    assert read_row["cache_read_tokens"] == second.cache_read_input_tokens
    assert read_row["cache_write_tokens"] == second.cache_creation_input_tokens
    assert read_row["input_tokens"] == second.input_tokens
    # A plan adds nothing to the bill; its list price prices the reads at the cache rate.
    assert read_row["cost_usd"] == 0
    assert read_row["list_cost_usd"] == pytest.approx(_list_cost("anthropic", CLAUDE, read_row))
    assert read_row["list_cost_usd"] < _uncached_cost("anthropic", CLAUDE, read_row)

    spend = httpx.get(f"{gateway.url}/admin/spend?by=connection&period=month").json()
    shares = {row["group"]: row["cache_hit_share"] for row in spend["rows"]}
    plan_a = [row for row in gateway.rows() if row["connection_id"] == "plan-a"]
    inputs = sum(
        r["input_tokens"] + r["cache_read_tokens"] + r["cache_write_tokens"] for r in plan_a
    )
    assert shares["plan-a"] == pytest.approx(second.cache_read_input_tokens / inputs)
    assert shares["plan-b"] == 0
    total = spend["total"]
    assert total["cache_read_tokens"] == second.cache_read_input_tokens

    (pool,) = httpx.get(f"{gateway.url}/admin/pools").json()["pools"]
    viewed = {account["id"]: account["cache_hit_share"] for account in pool["accounts"]}
    assert viewed == {"plan-a": pytest.approx(shares["plan-a"]), "plan-b": 0}

    shown = CliRunner().invoke(
        app, ["spend", "--url", gateway.url, "--by", "connection"], env={"COLUMNS": "200"}
    )
    assert shown.exit_code == 0, shown.output
    assert "cache hits" in shown.output
    plan_a_line = next(line for line in shown.output.splitlines() if "plan-a" in line)
    assert f"{100 * shares['plan-a']:.1f}%" in plan_a_line


def test_an_openai_conversation_reads_cached_tokens_at_the_cache_price_on_its_key_only(
    openai_keys: Accounts, start_gateway: StartGateway
) -> None:
    gateway = start_gateway(
        clock=openai_keys.clock, connections=openai_keys.connections, ladder=LADDER
    )
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Fix the failing test."},
    ]
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0) as client:
        first = client.chat.completions.with_raw_response.create(model=GPT, messages=messages)
        messages += [
            {"role": "assistant", "content": "Patched the assertion."},
            {"role": "user", "content": "Now run the suite."},
        ]
        second = client.chat.completions.with_raw_response.create(model=GPT, messages=messages)
        elsewhere = client.chat.completions.with_raw_response.create(
            model=f"key-b/{GPT}", messages=messages
        )
    assert first.headers["x-rungway-connection"] == second.headers["x-rungway-connection"]
    first_usage, second_usage = first.parse().usage, second.parse().usage
    elsewhere_usage = elsewhere.parse().usage
    assert first_usage is not None
    assert second_usage is not None
    assert elsewhere_usage is not None
    assert second_usage.prompt_tokens_details is not None
    cached = second_usage.prompt_tokens_details.cached_tokens
    assert cached is not None
    assert cached >= 1024
    assert cached % 128 == 0
    assert elsewhere.headers["x-rungway-connection"] == "key-b"
    assert elsewhere_usage.prompt_tokens_details is not None
    assert elsewhere_usage.prompt_tokens_details.cached_tokens == 0

    (read_row,) = [row for row in gateway.rows() if row["cache_read_tokens"]]
    assert read_row["connection_id"] == first.headers["x-rungway-connection"]
    assert read_row["cache_read_tokens"] == cached
    assert read_row["input_tokens"] == second_usage.prompt_tokens - cached
    # A metered key bills the reads at the cache rate.
    assert read_row["cost_usd"] == pytest.approx(_list_cost("openai", GPT, read_row))
    assert read_row["cost_usd"] < _uncached_cost("openai", GPT, read_row)
