"""A session that a spent pool sends to the paid rung comes back to its own account, which
holds its prompt cache, when the pool resets: not to whichever account the strategy puts
first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic

from rungway.clock import FakeClock
from rungway.sim import Scenario, SimUpstream
from rungway.sim.pool import SimPool
from tests.integration.conftest import API_KEY, CLAUDE, CLAUDE_CODE_HEADERS, START, StartGateway
from tests.integration.conftest import Upstreams as SessionUpstreams

CAPACITY = 5
TOKEN = "sk-ant-oat01-pool-return"


def _pool(clock: FakeClock) -> SimPool:
    scenario = Scenario.model_validate(
        {
            "name": "pool",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": TOKEN},
            "pool": {"accounts": 2},
            "models": [{"id": CLAUDE, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": [{"name": "5h", "unit": "requests", "capacity": CAPACITY, "length_s": 600}],
            "response": {"output_tokens": 8, "chunk_tokens": 4},
        }
    )
    return SimPool(scenario, clock)


def _connections(pool: SimPool, api: SimUpstream, folder: Path) -> list[dict[str, Any]]:
    entries = []
    for account in pool:
        secret = folder / f"{account.scenario.name}.secret"
        secret.write_text(account.scenario.auth.token or "")
        entries.append(
            {
                "id": account.scenario.name,
                "provider": "anthropic",
                "auth": "oauth",
                "credential": {"file": str(secret)},
                "base_url": account.url,
                "models": [CLAUDE],
            }
        )
    (folder / "paid.secret").write_text(API_KEY)
    credential = {"file": str(folder / "paid.secret")}
    paid = {"id": "paid", "provider": "anthropic", "auth": "apikey", "credential": credential}
    return [*entries, {**paid, "base_url": api.url, "models": [CLAUDE]}]


def test_a_session_back_from_the_paid_rung_returns_to_its_own_account(
    start_gateway: StartGateway, sims: SessionUpstreams, tmp_path: Path
) -> None:
    clock = FakeClock(START)
    with _pool(clock) as pool:
        first, second = pool.accounts
        ladder = {
            "rung_budget_usd": {"cheap": None, "premium": None},
            # Fill-first puts pool-1 first: only the pin can keep the session on pool-2.
            "pool_strategy": "fill_first",
            "max_wait_s": 0,
        }
        gateway = start_gateway(
            connections=_connections(pool, sims.api, tmp_path), ladder=ladder, clock=clock
        )
        headers = {**CLAUDE_CODE_HEADERS, "x-claude-code-session-id": "session-returns"}
        client = anthropic.Anthropic(
            base_url=gateway.url, api_key="unused", max_retries=0, default_headers=headers
        )

        def turn() -> str:
            raw = client.messages.with_raw_response.create(
                model="auto/thrifty",
                max_tokens=64,
                messages=[{"role": "user", "content": "Fix the failing test."}],
            )
            return raw.headers["x-rungway-connection"]

        first.set_window_used("5h", CAPACITY)
        assert turn() == "pool-2", "pool-1 is spent: the session starts on pool-2"
        second.set_window_used("5h", CAPACITY)
        assert turn() == "paid", "the whole pool is spent"
        # Past both accounts' resets (pool-2's at 300 s, pool-1's at 600 s), fill-first
        # would start with pool-1; the session's pin, kept through its paid turn, wins.
        clock.advance(610)
        assert turn() == "pool-2"
