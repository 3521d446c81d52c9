"""Gateways sharing their quota board through Redis: an operator's disable and a plan's
cooldown on one are honoured by the others, and by a gateway started afterwards."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx

from rungway.sim import HttpErrorFault
from tests.services import REDIS_URL

from .conftest import CLAUDE_CODE_HEADERS, RunningGateway, StartGateway, Upstreams

HELLO: list[Any] = [{"role": "user", "content": "Say hello."}]


def _served_by(gateway: RunningGateway) -> str:
    # Claude Code's client: the Claude plan serves no other.
    with anthropic.Anthropic(
        base_url=gateway.url, api_key="unused", max_retries=0, default_headers=CLAUDE_CODE_HEADERS
    ) as client:
        raw = client.messages.with_raw_response.create(
            model="auto/thrifty", max_tokens=64, messages=HELLO
        )
    return raw.headers["x-rungway-connection"]


def _subscription_connection(gateway: RunningGateway) -> dict[str, Any]:
    response = httpx.get(f"{gateway.url}/admin/connections")
    subscription: dict[str, Any] = next(
        c for c in response.json()["connections"] if c["id"] == "plan"
    )
    return subscription


def _soon(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 3
    while not check():
        assert time.monotonic() < deadline, "the change never arrived"
        time.sleep(0.005)


def test_a_disable_and_a_cooldown_on_one_gateway_hold_on_another_and_after_a_restart(
    redis_prefix: str, start_gateway: StartGateway, sims: Upstreams, tmp_path: Path
) -> None:
    # The prefix first: its keys are deleted after the gateways have stopped and written.
    shared = {"store": "redis", "redis": {"url": REDIS_URL, "prefix": redis_prefix}}

    def gateway(name: str) -> RunningGateway:
        ledger = {"path": str(tmp_path / f"{name}.sqlite3")}
        return start_gateway(state_section=shared, ledger=ledger)

    a, b = gateway("a"), gateway("b")
    assert _served_by(b) == "plan"
    assert httpx.post(f"{a.url}/admin/connections/plan/disable").is_success
    _soon(lambda: _subscription_connection(b)["disabled"])
    assert _served_by(b) == "cheap", "B steps past the plan A's operator disabled"

    assert httpx.post(f"{b.url}/admin/connections/plan/enable").is_success
    _soon(lambda: not _subscription_connection(a)["disabled"])
    sims.subscription.push_fault(HttpErrorFault(status=529, retry_after_s=600))
    assert _served_by(a) == "cheap", "the plan's 529 falls through on A"
    _soon(lambda: _subscription_connection(b)["cooldown_until"] is not None)
    asked = len(sims.subscription.requests)
    assert _served_by(b) == "cheap"
    assert len(sims.subscription.requests) == asked, "B sends the resting plan nothing"

    # A gateway started now begins with the plan resting, before its first request.
    c = gateway("c")
    assert _subscription_connection(c)["cooldown_until"] is not None
    assert _served_by(c) == "cheap"
    assert len(sims.subscription.requests) == asked
