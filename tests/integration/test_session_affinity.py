"""Session affinity through the gateway: Claude Code's sessions over a pool of two
simulated Claude plan accounts, through one gateway and through three replicas on Redis.

The pool is ordered fill-first, so without a pin every session would go to `plan-a`
whenever it is usable: a session found on `plan-b` is there because it is pinned.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from rungway.clock import FakeClock
from rungway.protocol.api import Api
from rungway.protocol.sessions import session_key, short_session
from rungway.sim import HttpErrorFault, Scenario, SimUpstream
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    START,
    RunningGateway,
    StartGateway,
)
from tests.services import REDIS_URL

HOUR = 3600.0
ACCOUNTS = ("plan-a", "plan-b")
CODEX = "gpt-5-codex"
LADDER = {
    "rung_budget_usd": {"cheap": None, "premium": None},
    "pool_strategy": "fill_first",
    # Longer than the 5h window, whose reset the first test waits for within one session.
    "session_ttl_s": 8 * HOUR,
}


def _token(name: str) -> str:
    return f"sk-ant-oat01-affinity-{name}"


def _account(name: str, token: str, requests: int) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": token},
            "models": [{"id": CLAUDE}],
            "windows": [
                {
                    "name": "5h",
                    "claim": "five_hour",
                    "unit": "requests",
                    "capacity": requests,
                    "length_s": 5 * HOUR,
                },
            ],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@dataclass
class Pool:
    """Two Claude plan accounts on one fake clock, and their connections."""

    clock: FakeClock
    sims: dict[str, SimUpstream]
    connections: list[dict[str, Any]]


def _pool(tmp_path: Path, capacity: dict[str, int]) -> Iterator[Pool]:
    clock = FakeClock(START)
    sims = {
        name: SimUpstream(_account(name, _token(name), capacity[name]), clock) for name in ACCOUNTS
    }
    with sims["plan-a"], sims["plan-b"]:
        connections = []
        for name, sim in sims.items():
            (tmp_path / f"{name}.token").write_text(_token(name))
            connections.append(
                {
                    "id": name,
                    "provider": "anthropic",
                    "auth": "oauth",
                    "credential": {"file": str(tmp_path / f"{name}.token")},
                    "base_url": sim.url,
                    "models": [CLAUDE],
                }
            )
        yield Pool(clock, sims, connections)


def _turn(gateway: RunningGateway, session: str, model: str = "auto/thrifty") -> str:
    """One turn of Claude Code's `session` asking for `model`; the connection that served it."""
    headers = {**CLAUDE_CODE_HEADERS, "x-claude-code-session-id": session}
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=headers
    ) as client:
        raw = client.messages.with_raw_response.create(
            model=model,
            max_tokens=32,
            messages=[{"role": "user", "content": f"Next step of {session}."}],
        )
    return raw.headers["x-rungway-connection"]


def _moves(gateway: RunningGateway) -> float:
    text = httpx.get(f"{gateway.url}/metrics").text
    (line,) = [row for row in text.splitlines() if row.startswith("rungway_session_moves_total")]
    return float(line.split()[-1])


def _soon(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 3
    while not check():
        assert time.monotonic() < deadline, "the change never arrived"
        time.sleep(0.005)


@pytest.fixture
def spent_soon(tmp_path: Path) -> Iterator[Pool]:
    """`plan-a` serves four requests a window; `plan-b` has room for the whole test."""
    yield from _pool(tmp_path, {"plan-a": 4, "plan-b": 1000})


def test_a_session_stays_on_its_account_and_moves_once_when_it_is_spent(
    spent_soon: Pool, start_gateway: StartGateway
) -> None:
    pool = spent_soon
    gateway = start_gateway(clock=pool.clock, connections=pool.connections, ladder=LADDER)
    served = [_turn(gateway, "session-1") for _ in range(8)]
    # plan-a serves until it is spent (its last request may be turned away and fall
    # through), then plan-b: one move, never back.
    switch = served.index("plan-b")
    assert 3 <= switch <= 4, served
    assert set(served[:switch]) == {"plan-a"}
    assert set(served[switch:]) == {"plan-b"}
    assert _moves(gateway) == 1

    # plan-a's window resets: a new session goes there, but session-1 stays where it moved.
    pool.clock.advance(5 * HOUR + 1)
    assert _turn(gateway, "session-2") == "plan-a"
    assert [_turn(gateway, "session-1") for _ in range(3)] == ["plan-b"] * 3
    assert _turn(gateway, "session-2") == "plan-a"
    assert _moves(gateway) == 1

    # The per-account view counts each account's pinned sessions.
    (only,) = httpx.get(f"{gateway.url}/admin/pools").json()["pools"]
    pinned = {account["id"]: account["pinned_sessions"] for account in only["accounts"]}
    assert pinned == {"plan-a": 1, "plan-b": 1}

    # The ledger names the session by a short hash of its key, never the key itself.
    key = session_key(Api.ANTHROPIC_MESSAGES, {"x-claude-code-session-id": "session-1"}, {}, b"")
    assert key is not None
    plans = [
        orjson.loads(row["plan"]) if isinstance(row["plan"], str | bytes) else row["plan"]
        for row in gateway.rows()
    ]
    sessions = {plan.get("session") for plan in plans if plan}
    assert short_session(key) in sessions
    assert not any("session-1" in str(plan) for plan in plans)


def test_without_affinity_nothing_is_pinned(spent_soon: Pool, start_gateway: StartGateway) -> None:
    pool = spent_soon
    ladder = {**LADDER, "session_affinity": False}
    gateway = start_gateway(clock=pool.clock, connections=pool.connections, ladder=ladder)
    served = [_turn(gateway, "session-1") for _ in range(6)]
    assert served[-1] == "plan-b"
    pool.clock.advance(5 * HOUR + 1)
    assert _turn(gateway, "session-1") == "plan-a", "no pin: fill-first takes it back"
    assert gateway.gateway.pins is None
    assert "rungway_session_moves" not in httpx.get(f"{gateway.url}/metrics").text


@pytest.fixture
def roomy(tmp_path: Path) -> Iterator[Pool]:
    """Both accounts have room for the whole test."""
    yield from _pool(tmp_path, {"plan-a": 1000, "plan-b": 1000})


def test_three_replicas_on_redis_keep_a_session_on_one_account(
    roomy: Pool, start_gateway: StartGateway, redis_prefix: str, tmp_path: Path
) -> None:
    pool = roomy
    shared = {"store": "redis", "redis": {"url": REDIS_URL, "prefix": redis_prefix}}
    replicas = [
        start_gateway(
            clock=pool.clock,
            connections=pool.connections,
            ladder=LADDER,
            state_section=shared,
            ledger={"path": str(tmp_path / f"{name}.sqlite3")},
        )
        for name in "abc"
    ]
    a, b, c = replicas
    # plan-a rests after a 529 on the session's first turn, which plan-b then serves.
    pool.sims["plan-a"].push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert _turn(a, "session-1") == "plan-b"
    pool.clock.advance(601)  # plan-a is back, and first in the pool again
    assert _turn(b, "session-2") == "plan-a"

    # Round-robin over the replicas, B and C never having served session-1 before.
    round_robin = itertools.cycle(replicas)
    turns = [_turn(next(round_robin), "session-1") for _ in range(9)]
    assert turns == ["plan-b"] * 9
    assert [_turn(replica, "session-2") for replica in replicas] == ["plan-a"] * 3

    # plan-b rests on C's turn: the session moves to plan-a once, and every replica
    # follows, though A and B had it pinned to plan-b.
    pool.sims["plan-b"].push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert _turn(c, "session-1") == "plan-a"
    key = session_key(Api.ANTHROPIC_MESSAGES, {"x-claude-code-session-id": "session-1"}, {}, b"")
    assert key is not None

    def followed(replica: RunningGateway) -> bool:
        pins = replica.gateway.pins
        assert pins is not None
        return pins.pinned(key, pool.clock.now()) == "plan-a"

    _soon(lambda: followed(a) and followed(b))
    pool.clock.advance(601)  # plan-b is back
    turns = [_turn(next(round_robin), "session-1") for _ in range(6)]
    assert turns == ["plan-a"] * 6
    assert sum(_moves(replica) for replica in replicas) == 1


def _codex_account(name: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "api": "responses",
            "quota_headers": "codex",
            "codex": {"plan_type": "plus"},
            "auth": {"kind": "bearer", "token": _token(name)},
            "models": [{"id": CODEX}],
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


@pytest.fixture
def codex_pool(tmp_path: Path) -> Iterator[Pool]:
    """Two ChatGPT plan accounts serving Codex (a Responses upstream)."""
    clock = FakeClock(START)
    sims = {name: SimUpstream(_codex_account(name), clock) for name in ACCOUNTS}
    with sims["plan-a"], sims["plan-b"]:
        connections = []
        for name, sim in sims.items():
            (tmp_path / f"{name}.token").write_text(_token(name))
            connections.append(
                {
                    "id": name,
                    "provider": "codex",
                    "auth": "oauth",
                    "credential": {"file": str(tmp_path / f"{name}.token")},
                    "base_url": f"{sim.url}/backend-api/codex",
                    "models": [CODEX],
                }
            )
        yield Pool(clock, sims, connections)


def test_a_responses_conversation_follows_its_previous_response_to_its_account(
    codex_pool: Pool, start_gateway: StartGateway
) -> None:
    pool = codex_pool
    gateway = start_gateway(clock=pool.clock, connections=pool.connections, ladder=LADDER)
    # plan-a rests after a 529 on the first turn, which plan-b then serves.
    pool.sims["plan-a"].push_fault(HttpErrorFault(status=529, retry_after_s=600))
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0)
    with client:
        first = client.responses.with_raw_response.create(
            model="auto/thrifty", input="Start a refactor.", store=False
        )
        assert first.headers["x-rungway-connection"] == "plan-b"
        pool.clock.advance(601)  # plan-a is back, and first in the pool again
        previous = first.parse().id
        served = []
        for turn in range(3):
            # Each turn names only the response before it: no key, no shared opening.
            raw = client.responses.with_raw_response.create(
                model="auto/thrifty", input=f"Step {turn}.", previous_response_id=previous
            )
            served.append(raw.headers["x-rungway-connection"])
            previous = raw.parse().id
        fresh = client.responses.with_raw_response.create(
            model="auto/thrifty", input="Another conversation."
        )
    assert served == ["plan-b"] * 3
    assert fresh.headers["x-rungway-connection"] == "plan-a"


def test_a_named_model_served_by_a_pool_keeps_a_session_on_its_account(
    roomy: Pool, start_gateway: StartGateway
) -> None:
    pool = roomy
    gateway = start_gateway(clock=pool.clock, connections=pool.connections, ladder=LADDER)
    # plan-a rests after a 529 on the session's first turn, which plan-b then serves.
    pool.sims["plan-a"].push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert _turn(gateway, "session-1", model=CLAUDE) == "plan-b"
    pool.clock.advance(601)  # plan-a is back, and first in the pool again
    assert [_turn(gateway, "session-1", model=CLAUDE) for _ in range(3)] == ["plan-b"] * 3
    assert _turn(gateway, "session-2", model=CLAUDE) == "plan-a"
