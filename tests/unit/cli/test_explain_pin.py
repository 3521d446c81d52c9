"""`rungway explain` names the connection a request's session was pinned to."""

from __future__ import annotations

from typing import Any

import pytest

from rungway.cli import explain


def _row(plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "request_id": "0123456789abcdef",
        "started_at": 1_790_000_000.0,
        "connection_id": "claude-2",
        "requested_model": "auto/subscription",
        "resolved_model": "claude-sonnet-4-5",
        "rung": "subscription",
        "outcome": "ok",
        "status": 200,
        "latency_ms": 812.0,
        "tokens": {"input": 10, "output": 5, "cache_read": 0, "cache_write": 0},
        "cost_usd": 0.0,
        "list_cost_usd": 0.0001,
        "attempts": [],
        "plan": plan,
    }


def _plan(pinned: str | None) -> dict[str, Any]:
    return {
        "requested": "auto/subscription",
        "ladder": "subscription",
        "category": None,
        "candidates": [
            {
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "rung": "subscription",
                "connections": ["claude-2", "claude-1"],
                "score": 0.9,
            }
        ],
        "skipped": [],
        "earliest_reset": None,
        "pinned": pinned,
    }


def test_a_pinned_request_says_which_connection_its_session_is_pinned_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    explain._render(_row(_plan("claude-2")))
    assert "pinned to claude-2 (session)" in capsys.readouterr().out


def test_an_unpinned_request_says_nothing_of_pins(capsys: pytest.CaptureFixture[str]) -> None:
    explain._render(_row(_plan(None)))
    explain._render(_row({}))
    assert "pinned" not in capsys.readouterr().out
