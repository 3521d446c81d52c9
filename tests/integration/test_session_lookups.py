"""Which requests look up a session's pin: only those a pin could bear on.

A session is pinned only to a plan account (and a Responses reply to the connection that
stored it), so a named model served by metered keys alone asks the pin store nothing,
while one with a plan account among its connections still finds and keeps its session's
pin. The store is the gateway's own, watched through its `pinned` lookups.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from rungway.engine.pins import MemoryPins
from tests.integration.conftest import (
    CLAUDE,
    CLAUDE_CODE_HEADERS,
    DEEPSEEK,
    RunningGateway,
    StartGateway,
)

SESSION = "4f0c1d7e-lookups"


def _watched(running: RunningGateway, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session keys the gateway's pin store is asked for, in order."""
    pins = running.gateway.pins
    assert isinstance(pins, MemoryPins)
    asked: list[str] = []
    lookup: Callable[[str, float], str | None] = pins.pinned

    def pinned(key: str, now: float) -> str | None:
        asked.append(key)
        return lookup(key, now)

    monkeypatch.setattr(pins, "pinned", pinned)
    return asked


def test_a_named_model_of_metered_keys_asks_the_pin_store_nothing(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = start_gateway()
    asked = _watched(running, monkeypatch)
    body = {
        "model": DEEPSEEK,
        "messages": [{"role": "user", "content": "Name three rivers."}],
        "prompt_cache_key": SESSION,
    }
    for _ in range(3):
        reply = httpx.post(f"{running.url}/v1/chat/completions", json=body, timeout=10)
        assert reply.status_code == 200, reply.text
        assert reply.headers["x-rungway-connection"] in ("cheap", "backup")
    assert asked == []
    assert running.gateway.pins is not None
    assert running.gateway.pins.pinned_counts() == {}


def test_a_named_model_with_a_plan_account_still_keeps_its_session_on_it(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    running = start_gateway()
    asked = _watched(running, monkeypatch)
    headers = {**CLAUDE_CODE_HEADERS, "x-claude-code-session-id": SESSION}
    body = {
        "model": CLAUDE,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "Name three rivers."}],
    }
    for _ in range(2):
        reply = httpx.post(f"{running.url}/v1/messages", json=body, headers=headers, timeout=10)
        assert reply.status_code == 200, reply.text
        assert reply.headers["x-rungway-connection"] == "plan"
    # One lookup per turn, of the one session's key; its pin is on the plan account.
    assert len(asked) == 2
    assert len(set(asked)) == 1
    assert asked[0].startswith("cc:")
    assert running.gateway.pins is not None
    assert running.gateway.pins.pinned_counts() == {"plan": 1}
