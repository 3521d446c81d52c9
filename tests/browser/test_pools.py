"""The dashboard's accounts by pool, in a real browser: two accounts of one Claude plan.

The page's own poll shows each account's burn rate and forecast as the readings come in.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from playwright.sync_api import Page, expect

from rungway.app import build_gateway
from rungway.clock import FakeClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from tests.browser.conftest import HELLO, MODEL
from tests.integration.conftest import CLAUDE_CODE_HEADERS

pytestmark = pytest.mark.browser

LIVE_MS = 10_000
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
DASH = "\u2013"
"""What the page shows for a number it does not have."""
ACCOUNTS = {"plan-a": "sk-ant-oat01-browser-pool-a", "plan-b": "sk-ant-oat01-browser-pool-b"}


def _account(token: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": f"browser-{token[-6:]}",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": token},
            "models": [{"id": MODEL}],
            "windows": [
                {"name": "5h", "claim": "five_hour", "capacity": 1000, "length_s": 18000},
                {"name": "7d", "claim": "seven_day", "capacity": 1_000_000, "length_s": 604800},
            ],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@dataclass
class PoolWorld:
    clock: FakeClock
    url: str

    def send(self, account: str) -> None:
        with anthropic.Anthropic(
            base_url=self.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
        ) as client:
            raw = client.messages.with_raw_response.create(
                model=f"{account}/{MODEL}", max_tokens=32, messages=HELLO
            )
        assert raw.headers["x-rungway-connection"] == account

    def account(self, account: str) -> dict[str, Any]:
        body = httpx.get(f"{self.url}/admin/pools").json()
        (pool,) = body["pools"]
        (found,) = [entry for entry in pool["accounts"] if entry["id"] == account]
        return dict(found)


@pytest.fixture
def pool_world(tmp_path: Path) -> Iterator[PoolWorld]:
    clock = FakeClock(float(int(time.time())))
    sims = [SimUpstream(_account(token), clock) for token in ACCOUNTS.values()]
    with sims[0], sims[1]:
        connections = []
        for (name, token), sim in zip(ACCOUNTS.items(), sims, strict=True):
            (tmp_path / name).write_text(token)
            connections.append(
                {
                    "id": name,
                    "provider": "anthropic",
                    "auth": "oauth",
                    "credential": {"file": str(tmp_path / name)},
                    "base_url": sim.url,
                    "models": [MODEL],
                }
            )
        settings = parse_settings(
            {
                "ledger": {"path": str(tmp_path / "ledger.sqlite3")},
                "quota": {"poll_interval_s": 0},
                "connections": connections,
            }
        )
        gateway = build_gateway(settings, read_secrets(settings), clock=clock)
        with BackgroundServer(uvicorn_config(gateway.app), "gateway") as server:
            yield PoolWorld(clock, server.url)


def test_the_dashboard_shows_each_account_of_a_pool_with_its_burn_rate_and_forecast(
    pool_world: PoolWorld, page: Page, artifacts: Path
) -> None:
    page.goto(f"{pool_world.url}/dashboard")
    pool = page.locator('.pool[data-pool="anthropic"]')
    expect(pool).to_be_visible()
    expect(pool.get_by_role("heading")).to_have_text("anthropic · 2 accounts")
    first = pool.locator('tr[data-account="plan-a"]')
    second = pool.locator('tr[data-account="plan-b"]')
    expect(first).to_contain_text("no quota window reported")
    expect(second).to_have_attribute("data-outlook", "unknown")

    # One reading each: windows and resets, but no rate yet.
    pool_world.send("plan-a")
    pool_world.send("plan-b")
    expect(first.locator('.account-window[data-window="5h"]')).to_have_text(
        re.compile(r"^5h [\d.]+% used · resets in (4h 59m \d\ds|5h 00m 00s)$"),
        timeout=LIVE_MS,
    )
    expect(first.locator('.burn[data-window="5h"]')).to_have_text(f"5h: {DASH}")
    expect(first.locator(".runs-out")).to_have_text("unknown: fewer than two readings")

    # Two more readings a minute apart: the first account burns its 5h window fast.
    for _ in range(2):
        pool_world.clock.advance(60)
        pool_world.send("plan-a")
    said = pool_world.account("plan-a")
    five = next(window for window in said["windows"] if window["name"] == "5h")
    assert five["burn_per_hour"] > 0
    expect(first.locator('.burn[data-window="5h"]')).to_have_text(
        f"5h: {five['burn_per_hour']:.1f}%/h", timeout=LIVE_MS
    )
    expect(first).to_have_attribute("data-outlook", said["binding"]["outlook"])
    assert said["binding"]["outlook"] == "runs_out"
    expect(first.locator(".runs-out")).to_have_text(
        re.compile(f"^5h runs out at {ISO}, in \\d+m \\d\\ds$")
    )
    expect(first.locator(".runs-out time")).to_have_attribute("datetime", re.compile(f"^{ISO}$"))
    # Requests that name their account pin no session; a short prompt caches nothing.
    assert said["pinned_sessions"] == 0
    expect(first.locator(".pinned")).to_have_text("0")
    expect(first.locator(".cache")).to_have_text("0%")
    expect(second).to_have_attribute("data-outlook", "unknown")
    expect(second.locator(".runs-out")).to_have_text("unknown: fewer than two readings")

    # A Claude Code session on the ladder is pinned to the account that served it.
    headers = {**CLAUDE_CODE_HEADERS, "x-claude-code-session-id": "browser-session"}
    with anthropic.Anthropic(
        base_url=pool_world.url, api_key="unused", max_retries=0, default_headers=headers
    ) as client:
        raw = client.messages.with_raw_response.create(
            model="auto/subscription", max_tokens=32, messages=HELLO
        )
    holder = raw.headers["x-rungway-connection"]
    other = "plan-b" if holder == "plan-a" else "plan-a"
    expect(pool.locator(f'tr[data-account="{holder}"] .pinned')).to_have_text("1", timeout=LIVE_MS)
    expect(pool.locator(f'tr[data-account="{other}"] .pinned')).to_have_text("0")
    page.emulate_media(color_scheme="light")
    pool.screenshot(path=artifacts / "pools-light.png")
    page.emulate_media(color_scheme="dark")
    pool.screenshot(path=artifacts / "pools-dark.png")
