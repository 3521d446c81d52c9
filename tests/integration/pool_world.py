"""The world of the pool end-to-end test: three simulated Claude plan accounts and a paid
key behind a gateway, and thirty coding-agent sessions from the official `anthropic` SDK.

The accounts (`sim/pool.py`) each have their own OAuth token and a "5h" window of a few
seconds whose resets are staggered; an Anthropic API key is the paid rung behind them. Every
session is an `AsyncAnthropic` client standing in for Claude Code (its headers, its session
header and `metadata.user_id`), sending turns with a growing conversation and
`cache_control` breakpoints on its system prompt and its latest turn, with a pause between
turns, as a coding agent does. A quiet spell in the middle leaves windows unfilled at their
resets.

It runs on the real clock with windows of a few seconds (the accelerated clock): the
ledger dates each request by the wall clock, so the trace `rungway whatif --from-ledger`
reads from it and the windows the sims kept share one timeline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic

from rungway.app import build_gateway
from rungway.clock import SystemClock
from rungway.config import parse_settings
from rungway.credentials.secrets import read_secrets
from rungway.ledger.sqlite import read_rows
from rungway.runner import BackgroundServer, uvicorn_config
from rungway.sim import Scenario, SimUpstream
from rungway.sim.pool import SimPool
from tests.integration.conftest import CLAUDE_CODE_HEADERS

CLAUDE = "claude-sonnet-4-5"
POOL_TOKEN = "sk-ant-oat01-pool-e2e"
PAID_KEY = "sk-ant-api03-pool-e2e"
ACCOUNTS = 3
WINDOW_S = 6
"""Each account's "5h" window, accelerated: it resets every six seconds, and the three
accounts' resets are two seconds apart."""
CAPACITY = 30
"""Requests per window per account."""
SESSIONS = 30
RUN_S = 14.0
QUIET = (3.5, 10.5)
"""Seconds into the run when only the first session keeps working: the window of the
account that resets four seconds in ends within it, unfilled."""
QUIET_SESSIONS = 1
"""One session, some three turns a second, cannot fill a window of thirty in six seconds."""
RESET_GUARD_S = 0.5
"""No turn starts this close before a reset. The ledger dates a request when the gateway
receives it and the sim admits it a moment later; a reset in between would make the run
and the replay disagree about that one request for reasons no router controls."""
SYSTEM = " ".join(
    f"Rule {n}: keep changes small, run the tests, and explain what changed and why."
    for n in range(120)
)
"""A coding agent's long, fixed system prompt: the prefix its prompt cache holds. Each
session opens it with its own name, so no two sessions share a cached prefix: the what-if
replay keeps a cache per session (`whatif/prompt_cache.py`) and cannot know that one
session's first turn read a prefix another session wrote on the same account."""


def _pool_scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "pool",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": POOL_TOKEN},
            "pool": {"accounts": ACCOUNTS},
            "models": [{"id": CLAUDE, "context_window": 200000, "max_output_tokens": 8192}],
            "windows": [
                {
                    "name": "5h",
                    "claim": "five_hour",
                    "unit": "requests",
                    "capacity": CAPACITY,
                    "length_s": WINDOW_S,
                }
            ],
            "response": {"output_tokens": 24, "chunk_tokens": 8},
        }
    )


def _paid_scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "name": "paid",
            "api": "anthropic",
            "quota_headers": "anthropic-apikey",
            "auth": {"kind": "x-api-key", "token": PAID_KEY},
            "models": [{"id": CLAUDE, "context_window": 200000, "max_output_tokens": 8192}],
            "response": {"output_tokens": 24, "chunk_tokens": 8},
        }
    )


@dataclass(frozen=True)
class Turn:
    """One turn of one session, as the client saw it."""

    session: int
    index: int
    request_id: str
    connection: str
    cache_read: int


@dataclass
class AgentSession:
    """A coding agent's conversation: each turn resends the whole of it."""

    number: int
    url: str
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    def client(self) -> anthropic.AsyncAnthropic:
        headers = {**CLAUDE_CODE_HEADERS, "x-claude-code-session-id": self.session_id}
        return anthropic.AsyncAnthropic(
            base_url=self.url, api_key="unused", max_retries=0, default_headers=headers
        )

    async def turn(self, client: anthropic.AsyncAnthropic) -> None:
        index = len(self.turns)
        # The breakpoint moves to the newest turn, as Claude Code's does: earlier turns
        # are read from the cache the previous turn wrote.
        for message in self.messages:
            for block in message["content"]:
                block.pop("cache_control", None)
        text = f"Session {self.number}, step {index}: read the failing test and fix it."
        self.messages.append(
            {
                "role": "user",
                "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}],
            }
        )
        async with client.messages.stream(
            model="auto/thrifty",
            max_tokens=512,
            system=[
                {
                    "type": "text",
                    "text": f"Agent {self.number}. {SYSTEM}",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            messages=self.messages,  # type: ignore[arg-type]
            metadata={"user_id": f"user_e2e_account_pool_session_{self.session_id}"},
        ) as stream:
            reply = await stream.get_final_message()
            headers = stream.response.headers
        answer = "".join(block.text for block in reply.content if block.type == "text")
        self.messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
        self.turns.append(
            Turn(
                self.number,
                index,
                headers["x-rungway-request-id"],
                headers["x-rungway-connection"],
                reply.usage.cache_read_input_tokens or 0,
            )
        )


@dataclass
class Schedule:
    """When the run ends, when it is quiet, and the resets no turn may start just before."""

    start: float
    resets: list[float]

    def busy(self, session: int, now: float) -> bool:
        quiet = self.start + QUIET[0] <= now < self.start + QUIET[1]
        return session < QUIET_SESSIONS or not quiet

    def clear_of_resets(self, now: float) -> float:
        """Seconds to wait so that no reset falls within the guard after starting."""
        ahead = [reset for reset in self.resets if now <= reset < now + RESET_GUARD_S]
        return max(ahead) + 0.02 - now if ahead else 0.0


async def _drive(session: AgentSession, schedule: Schedule) -> None:
    client = session.client()
    # Agents think for different lengths of time, so turns do not arrive in lockstep.
    pause = 0.25 + 0.01 * (session.number % 7)
    async with client:
        while (now := time.time()) < schedule.start + RUN_S:
            if not schedule.busy(session.number, now):
                await asyncio.sleep(0.05)
                continue
            wait = schedule.clear_of_resets(now)
            if wait:
                await asyncio.sleep(wait)
                continue
            await session.turn(client)
            await asyncio.sleep(pause)


def _connections(pool: SimPool, paid: SimUpstream, folder: Path) -> list[dict[str, Any]]:
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
    (folder / "paid.secret").write_text(PAID_KEY)
    entries.append(
        {
            "id": "paid",
            "provider": "anthropic",
            "auth": "apikey",
            "credential": {"file": str(folder / "paid.secret")},
            "base_url": paid.url,
            "models": [CLAUDE],
        }
    )
    return entries


LADDER = {
    "rung_budget_usd": {"cheap": None, "premium": None},
    # A window leaves the ladder when it is full, not a request before: a run's requests in
    # flight would otherwise spend past the cutoff that a replay, one request at a time,
    # stops at.
    "exit_cutoff_percent": 0,
    # Waits for a near reset are their own test: here a spent pool pays at once.
    "max_wait_s": 0,
}


def _resets(pool: SimPool, until: float) -> list[float]:
    resets = []
    for account in pool:
        reset = account.state().window("5h").reset_at
        while reset < until:
            resets.append(reset)
            reset += WINDOW_S
    return sorted(resets)


def _run(pool: SimPool, url: str) -> list[AgentSession]:
    pool.reset()  # the windows start now, staggered
    start = time.time()
    schedule = Schedule(start, _resets(pool, start + RUN_S + WINDOW_S))
    sessions = [AgentSession(number, url) for number in range(SESSIONS)]

    async def everyone() -> None:
        await asyncio.gather(*(_drive(session, schedule) for session in sessions))

    asyncio.run(everyone())
    return sessions


@dataclass
class PoolRun:
    """What one run left: its sessions' turns, its ledger rows and what it ran against."""

    sessions: list[AgentSession]
    rows: dict[str, dict[str, Any]]
    """Every ledger row, by request id."""
    pool: SimPool
    connections: list[dict[str, Any]]
    ledger: Path
    folder: Path

    @property
    def accounts(self) -> list[str]:
        """The pool's connection ids, in account order."""
        return [account.scenario.name for account in self.pool]

    def row(self, turn: Turn) -> dict[str, Any]:
        """The ledger row of one turn."""
        return self.rows[turn.request_id]


def settings_document(connections: list[dict[str, Any]], ledger: Path) -> dict[str, Any]:
    """The gateway's config, which the what-if replay is given too."""
    return {
        "timeouts": {"connect_s": 2, "first_byte_s": 5, "idle_s": 5},
        # No background polls: the gateway learns the windows from the answers, as the
        # replay does.
        "quota": {"poll_interval_s": 0},
        "ladder": LADDER,
        "ledger": {"path": str(ledger)},
        "connections": connections,
    }


@contextmanager
def pool_run(folder: Path) -> Iterator[PoolRun]:
    """Start the sims and the gateway, drive the sessions through them, and yield the run
    (the sims still serving, for their windows' state)."""
    with (
        SimPool(_pool_scenario(), SystemClock()) as pool,
        SimUpstream(_paid_scenario()) as paid,
    ):
        connections = _connections(pool, paid, folder)
        ledger = folder / "ledger.sqlite3"
        settings = parse_settings(settings_document(connections, ledger))
        gateway = build_gateway(settings, read_secrets(settings))
        server = BackgroundServer(
            uvicorn_config(gateway.app, limits=settings.server), name="pool-gateway"
        )
        url = server.start()
        try:
            sessions = _run(pool, url)
            gateway.ledger.flush()
        finally:
            server.stop()
        rows = {row["request_id"]: row for row in read_rows(ledger, limit=100_000)}
        yield PoolRun(sessions, rows, pool, connections, ledger, folder)
