"""End to end: a pool of three Claude plan accounts behind `auto/thrifty`, driven by thirty
coding-agent sessions from the official `anthropic` SDK, against what `rungway whatif`
predicts for the same traffic.

The world: three simulated Claude plan accounts (`sim/pool.py`), each with its own OAuth
token and a short "5h" window whose resets are staggered, and an Anthropic API key behind
them as the paid rung. Every session is an `AsyncAnthropic` client standing in for Claude
Code (its headers, its session header and `metadata.user_id`), sending turns with a
growing conversation and `cache_control` breakpoints on the system prompt and the latest
turn, with a pause between turns, as a coding agent does. A quiet spell in the middle
leaves some windows unfilled when they reset.

The run uses the real clock, with windows of a few seconds (the accelerated clock): the
ledger dates each request by the wall clock, so the trace `rungway whatif --from-ledger`
reads from it and the windows the sims kept are on one timeline.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import pytest
import yaml

from rungway.clock import SystemClock
from rungway.ledger.sqlite import read_rows
from rungway.sim import Scenario, SimUpstream
from rungway.sim.pool import SimPool
from tests.integration.conftest import CLAUDE_CODE_HEADERS, StartGateway

pytestmark = pytest.mark.slow

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
"""Seconds into the run when only the first few sessions keep working."""
QUIET_SESSIONS = 2
RESET_GUARD_S = 0.35
"""No turn starts this close before a reset. The ledger dates a request when the gateway
receives it and the sim admits it a moment later; a reset in between would make the run
and the replay disagree about that one request for reasons no router controls."""
SYSTEM = " ".join(
    f"Rule {n}: keep changes small, run the tests, and explain what changed and why."
    for n in range(120)
)
"""A coding agent's long, fixed system prompt: the prefix its prompt cache holds."""
MUST_MOVE = {"quota_exhausted", "quota_below_reentry", "cooldown", "breaker_open"}
"""The skip reasons that mean an account could not serve a session's turn."""


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
            system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
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


@pytest.fixture
def pool() -> Any:
    with SimPool(_pool_scenario(), SystemClock()) as running:
        yield running


@pytest.fixture
def paid() -> Any:
    with SimUpstream(_paid_scenario()) as running:
        yield running


def _resets(pool: SimPool, until: float) -> list[float]:
    resets = []
    for account in pool:
        reset = account.state().window("5h").reset_at
        while reset < until:
            resets.append(reset)
            reset += WINDOW_S
    return sorted(resets)


def _run(pool: SimPool, url: str) -> tuple[list[AgentSession], Schedule]:
    pool.reset()  # the windows start now, staggered
    start = time.time()
    schedule = Schedule(start, _resets(pool, start + RUN_S + WINDOW_S))
    sessions = [AgentSession(number, url) for number in range(SESSIONS)]

    async def everyone() -> None:
        await asyncio.gather(*(_drive(session, schedule) for session in sessions))

    asyncio.run(everyone())
    return sessions, schedule


def test_a_pool_spreads_keeps_sessions_and_matches_its_whatif(
    start_gateway: StartGateway, pool: SimPool, paid: SimUpstream, tmp_path: Path
) -> None:
    pytest.importorskip("rungway.routing.pools", reason="the routing core's pools have not landed")
    connections = _connections(pool, paid, tmp_path)
    gateway = start_gateway(connections=connections, ladder=LADDER, aliases={})
    sessions, schedule = _run(pool, gateway.url)
    gateway.gateway.ledger.flush()
    rows = {row["request_id"]: row for row in read_rows(gateway.ledger_path, limit=100_000)}
    turns = [turn for session in sessions for turn in session.turns]
    assert len(rows) == len(turns), "every turn has its ledger row"
    accounts = [account.scenario.name for account in pool]
    served = Counter(rows[turn.request_id]["connection_id"] for turn in turns)
    firsts = Counter(rows[session.turns[0].request_id]["connection_id"] for session in sessions)
    moves = _moves(sessions, rows, accounts)
    live = _live_figures(turns, rows, pool, schedule)
    predicted = _whatif(gateway.ledger_path, connections, pool, tmp_path)
    report = {
        "served": served,
        "first_turns": firsts,
        "moves": len(moves),
        "unjustified": [move for move in moves if not move.justified][:5],
        "live": live,
        "predicted": predicted,
    }
    print(json.dumps(report, indent=2, default=str))

    # The pool spreads: every account serves, and the paid rung only past them.
    assert all(served[account] > 0 for account in accounts), served
    assert served["paid"] > 0, "the pool runs out, and the paid rung serves"
    # Every session stays on its account until that account cannot serve it.
    assert all(move.justified for move in moves), report["unjustified"]
    # What the run did is what whatif predicts for its trace.
    assert predicted["paid_usd"] == pytest.approx(live["paid_usd"], rel=0.05)


@dataclass(frozen=True)
class Move:
    """A session's turn served by another account than its previous plan turn."""

    session: int
    turn: int
    left: str
    to: str
    justified: bool
    evidence: str


def _moves(
    sessions: list[AgentSession], rows: dict[str, dict[str, Any]], accounts: list[str]
) -> list[Move]:
    moves = []
    for session in sessions:
        pinned: str | None = None
        for turn in session.turns:
            row = rows[turn.request_id]
            served = row["connection_id"]
            if pinned is not None and served != pinned:
                evidence = _why_not(row, pinned)
                moves.append(
                    Move(
                        session.number,
                        turn.index,
                        pinned,
                        served,
                        evidence is not None,
                        evidence or "",
                    )
                )
            if served in accounts:
                pinned = served
    return moves


def _why_not(row: dict[str, Any], account: str) -> str | None:
    """What in the turn's ledger row shows `account` could not serve it, if anything."""
    for attempt in row["attempts"]:
        if attempt["connection_id"] == account and attempt["outcome"] == "quota_exhausted":
            return f"attempt {attempt['outcome']}"
    for skip in row["plan"]["skipped"]:
        if skip.get("connection") == account and skip["reason"] in MUST_MOVE:
            return f"skipped {skip['reason']}"
    return None


def _live_figures(
    turns: list[Turn], rows: dict[str, dict[str, Any]], pool: SimPool, schedule: Schedule
) -> dict[str, Any]:
    paid = sum(row["cost_usd"] for row in rows.values())
    inputs = sum(
        row["input_tokens"] + row["cache_read_tokens"] + row["cache_write_tokens"]
        for row in rows.values()
    )
    cache = sum(row["cache_read_tokens"] for row in rows.values())
    # Unused quota at each reset within the run: capacity less the requests each account
    # served in the window that reset.
    by_account: dict[str, list[float]] = defaultdict(list)
    for row in rows.values():
        by_account[row["connection_id"]].append(row["started_at"])
    unused = 0
    for account in pool:
        reset = account.state().window("5h").reset_at
        name = account.scenario.name
        while reset - WINDOW_S > schedule.start:
            reset -= WINDOW_S
        while reset <= schedule.start + RUN_S:
            used = sum(reset - WINDOW_S <= at < reset for at in by_account[name])
            unused += max(0, CAPACITY - used)
            reset += WINDOW_S
    return {
        "requests": len(turns),
        "paid_usd": paid,
        "paid_requests": sum(row["connection_id"] == "paid" for row in rows.values()),
        "cache_hit_share": cache / inputs if inputs else 0.0,
        "unused_at_resets": unused,
    }


def _whatif(
    ledger: Path, connections: list[dict[str, Any]], pool: SimPool, folder: Path
) -> dict[str, Any]:
    config = folder / "whatif.yaml"
    document = {
        "ledger": {"path": str(ledger)},
        "quota": {"poll_interval_s": 0},
        "ladder": LADDER,
        "connections": connections,
    }
    config.write_text(yaml.safe_dump(document, sort_keys=False))
    windows = []
    for account in pool:
        reset = account.state().window("5h").reset_at
        # The sim's windows run on a grid of their length through their first reset.
        anchor = reset - WINDOW_S
        name = account.scenario.name
        windows += ["--window", f"{name}:5h:{WINDOW_S}:{CAPACITY}:requests:fixed@{anchor!r}"]
    command = [sys.executable, "-m", "rungway", "whatif", "--config", str(config)]
    done = subprocess.run(
        [*command, "--from-ledger", "--policies", "ladder", "--json", *windows],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (figures,) = json.loads(done.stdout)["policies"]
    return dict(figures)
