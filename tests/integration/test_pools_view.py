"""The per-account view: `GET /admin/pools` and `rungway status` over two accounts of one plan.

Two simulated Claude plan accounts share the gateway's fake clock. The first is spent fast
and runs out before its 5h window resets; the second was bought earlier, so its window
resets ten minutes in, before it could run out; then its reset starts a new history.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from rungway.clock import FakeClock
from rungway.sim import Scenario, SimUpstream
from tests.integration.conftest import CLAUDE, CLAUDE_CODE_HEADERS, START, StartGateway

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]
HOUR = 3600.0
B_RESETS_IN = 600.0


def _account(token: str, first_reset_at: float | None, capacity: int = 1000) -> Scenario:
    return Scenario.model_validate(
        {
            "name": f"pool-{token[-1]}",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": token},
            "models": [{"id": CLAUDE}],
            "windows": [
                {
                    "name": "5h",
                    "claim": "five_hour",
                    "capacity": capacity,
                    "length_s": 5 * HOUR,
                    "first_reset_at": first_reset_at,
                },
                {"name": "7d", "claim": "seven_day", "capacity": 1_000_000, "length_s": 604800},
            ],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@dataclass
class Pool:
    clock: FakeClock
    url: str

    def send(self, account: str) -> None:
        """One request from Claude Code to one account, named by its connection id."""
        with anthropic.Anthropic(
            base_url=self.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
        ) as client:
            raw = client.messages.with_raw_response.create(
                model=f"{account}/{CLAUDE}", max_tokens=32, messages=HELLO
            )
        assert raw.headers["x-rungway-connection"] == account

    def used(self, account: str, window: str) -> float:
        """The window's used share as the gateway last read it."""
        body = httpx.get(f"{self.url}/admin/connections").json()
        (entry,) = [c for c in body["connections"] if c["id"] == account]
        (found,) = [w for w in entry["windows"] if w["name"] == window]
        return float(found["used_percent"])

    def pools(self) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/admin/pools")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def _start_pool(
    start_gateway: StartGateway,
    folder: Path,
    clock: FakeClock,
    *,
    b_resets_at: float | None,
    capacity: int = 1000,
) -> Iterator[Pool]:
    tokens = {"plan-a": "sk-ant-oat01-pool-a", "plan-b": "sk-ant-oat01-pool-b"}
    first = SimUpstream(_account(tokens["plan-a"], None, capacity), clock)
    second = SimUpstream(_account(tokens["plan-b"], b_resets_at, capacity), clock)
    with first, second:
        connections = []
        for (name, token), sim in zip(tokens.items(), (first, second), strict=True):
            (folder / f"{name}.token").write_text(token)
            connections.append(
                {
                    "id": name,
                    "provider": "anthropic",
                    "auth": "oauth",
                    "credential": {"file": str(folder / f"{name}.token")},
                    "base_url": sim.url,
                    "models": [CLAUDE],
                }
            )
        gateway = start_gateway(clock=clock, connections=connections)
        yield Pool(clock, gateway.url)


@pytest.fixture
def pool(start_gateway: StartGateway, tmp_path: Path) -> Iterator[Pool]:
    """Two accounts; the second, bought earlier, has its 5h window reset ten minutes in."""
    yield from _start_pool(
        start_gateway, tmp_path, FakeClock(START), b_resets_at=START + B_RESETS_IN
    )


@pytest.fixture
def roomy_pool(start_gateway: StartGateway, tmp_path: Path) -> Iterator[Pool]:
    """Two accounts with room for long prompts, on a clock at the wall clock's time, as the
    ledger stamps its rows by it (the cache-hit share is today's)."""
    clock = FakeClock(float(int(time.time())))
    yield from _start_pool(start_gateway, tmp_path, clock, b_resets_at=None, capacity=10**7)


def _accounts(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (only,) = body["pools"]
    return {account["id"]: account for account in only["accounts"]}


def _window(account: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [w for w in account["windows"] if w["name"] == name]
    return dict(found)


def test_each_account_of_a_pool_shows_its_burn_rate_and_when_it_runs_out(pool: Pool) -> None:
    used: dict[str, list[float]] = {"plan-a": [], "plan-b": []}
    for step, senders in enumerate((("plan-a", "plan-b"), ("plan-a",), ("plan-a", "plan-b"))):
        if step:
            pool.clock.advance(60)
        for account in senders:
            pool.send(account)
            used[account].append(pool.used(account, "5h"))
    body = pool.pools()
    assert body["now"] == START + 120
    (only,) = body["pools"]
    assert (only["pool"], only["provider"], only["owner"]) == ("anthropic", "anthropic", None)
    accounts = _accounts(body)
    assert list(accounts) == ["plan-a", "plan-b"], "config order"

    # The first account: readings at 0, 60 and 120 s; its rate is over all of them.
    first = accounts["plan-a"]
    a_rate = (used["plan-a"][-1] - used["plan-a"][0]) / 120 * HOUR
    assert a_rate > 0
    five = _window(first, "5h")
    assert five["used_percent"] == used["plan-a"][-1]
    assert five["burn_per_hour"] == pytest.approx(a_rate)
    runs_out = START + 120 + (100 - used["plan-a"][-1]) / a_rate * HOUR
    assert five["resets_at"] > runs_out, "spent before its reset"
    assert (five["outlook"], five["outlook_at"]) == ("runs_out", pytest.approx(runs_out))
    assert first["binding"] == {
        "window": "5h",
        "model": None,
        "outlook": "runs_out",
        "at": pytest.approx(runs_out),
    }
    # Requests that name their account pin no session; a short prompt caches nothing.
    assert body["pinning"] is True
    assert first["pinned_sessions"] == 0
    assert first["cache_hit_share"] in (None, 0, 0.0)

    # The second account resets before it could run out at its own rate.
    second = accounts["plan-b"]
    b_rate = (used["plan-b"][-1] - used["plan-b"][0]) / 120 * HOUR
    b_five = _window(second, "5h")
    assert b_five["burn_per_hour"] == pytest.approx(b_rate)
    assert b_five["resets_at"] == START + B_RESETS_IN
    assert START + 120 + (100 - used["plan-b"][-1]) / b_rate * HOUR > START + B_RESETS_IN
    assert second["binding"] == {
        "window": "5h",
        "model": None,
        "outlook": "not_before_reset",
        "at": START + B_RESETS_IN,
    }

    # Past its reset the next reading starts a new history: no rate until a second one.
    pool.clock.set(START + B_RESETS_IN + 1)
    pool.send("plan-b")
    after = _accounts(pool.pools())["plan-b"]
    assert _window(after, "5h")["burn_per_hour"] is None
    assert _window(after, "5h")["outlook"] == "unknown"
    # The weekly window's history goes on through the 5h reset; its share (sent in whole
    # percents) has not moved, so it burns nothing and resets first: it binds now.
    week = _window(after, "7d")
    assert week["burn_per_hour"] == 0.0
    assert after["binding"] == {
        "window": "7d",
        "model": None,
        "outlook": "not_before_reset",
        "at": week["resets_at"],
    }

    shown = subprocess.run(
        [sys.executable, "-m", "rungway", "status", "--url", pool.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "240"},
    )
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout.split("the plans' accounts, by pool", 1)[1]
    rows = {
        cells[2].strip(): cells
        for line in table.splitlines()
        if (cells := line.split("│")) and len(cells) > 7 and cells[2].strip()
    }
    assert rows["plan-a"][1].strip() == "anthropic (2)"
    after_rate = _window(_accounts(pool.pools())["plan-a"], "5h")["burn_per_hour"]
    assert f"5h: {after_rate:.1f}%/h" in rows["plan-a"][4]
    assert "5h in " in rows["plan-a"][5], "the first account's 5h runs out, counted down"
    assert "not before reset" in rows["plan-b"][5]
    assert "7d resets in" in rows["plan-b"][5]
    assert "5h: -" in rows["plan-b"][4], "no rate yet in the new 5h period"


def test_a_gateway_without_plans_answers_no_pools(start_gateway: StartGateway) -> None:
    gateway = start_gateway(
        connections=[
            {
                "id": "local",
                "provider": "ollama",
                "auth": "none",
                "base_url": "http://127.0.0.1:9",
                "models": ["llama3"],
            }
        ]
    )
    response = httpx.get(f"{gateway.url}/admin/pools")
    assert response.status_code == 200
    assert response.json()["pools"] == []


def test_each_account_counts_the_sessions_pinned_to_it_until_their_pins_expire(
    pool: Pool,
) -> None:
    served: dict[str, str] = {}
    for session in ("one", "two", "three", "one", "two"):
        headers = {**CLAUDE_CODE_HEADERS, "x-claude-code-session-id": f"session-{session}"}
        with anthropic.Anthropic(
            base_url=pool.url, api_key="unused", max_retries=0, default_headers=headers
        ) as client:
            raw = client.messages.with_raw_response.create(
                model="auto/subscription", max_tokens=32, messages=HELLO
            )
        account = raw.headers["x-rungway-connection"]
        assert served.setdefault(session, account) == account, "a session stays on its account"
    body = pool.pools()
    assert body["pinning"] is True
    pinned = {account: entry["pinned_sessions"] for account, entry in _accounts(body).items()}
    assert pinned == {
        account: sum(1 for held in served.values() if held == account)
        for account in ("plan-a", "plan-b")
    }
    assert sum(pinned.values()) == 3
    # Past the pins' TTL (an hour by default) no session holds an account any more.
    pool.clock.advance(3601)
    after = {
        account: entry["pinned_sessions"] for account, entry in _accounts(pool.pools()).items()
    }
    assert after == {"plan-a": 0, "plan-b": 0}


def _cached_turn(url: str, account: str, system: str) -> dict[str, Any]:
    """One turn with a long system prompt marked for caching; the usage the client saw."""
    with anthropic.Anthropic(
        base_url=url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        message = client.messages.create(
            model=f"{account}/{CLAUDE}",
            max_tokens=32,
            system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            messages=HELLO,
        )
    return message.usage.model_dump()


def test_each_account_shows_its_share_of_cache_hits_today(roomy_pool: Pool) -> None:
    system = "You review pull requests for a payments service. " * 200
    usages = [_cached_turn(roomy_pool.url, "plan-a", system) for _ in range(3)]
    usages.append(_cached_turn(roomy_pool.url, "plan-b", system))
    # The first turn on each account writes the prefix; the next ones on plan-a read it.
    assert [u["cache_read_input_tokens"] > 0 for u in usages] == [False, True, True, False]
    accounts = _accounts(roomy_pool.pools())
    spend = httpx.get(
        f"{roomy_pool.url}/admin/spend", params={"by": "connection", "period": "day"}
    ).json()
    rows = {row["group"]: row for row in spend["rows"]}
    read = sum(u["cache_read_input_tokens"] for u in usages[:3])
    every = sum(
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in usages[:3]
    )
    assert rows["plan-a"]["input_tokens"] == every
    assert accounts["plan-a"]["cache_hit_share"] == pytest.approx(read / every)
    assert accounts["plan-b"]["cache_hit_share"] == 0.0

    shown = subprocess.run(
        [sys.executable, "-m", "rungway", "status", "--url", roomy_pool.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "COLUMNS": "240"},
    )
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout.split("the plans' accounts, by pool", 1)[1]
    (first,) = [line for line in table.splitlines() if "│ plan-a" in line]
    assert first.rstrip("│ ").endswith(f"{read / every * 100:.0f}%")
