"""Model names a client makes up cannot pin the gateway's memory."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import httpx

from tests.integration.conftest import CLAUDE, StartGateway

HELLO: list[Any] = [{"role": "user", "content": "x"}]
PLANNING = ("*/rungway/engine/planning.py", "*/rungway/routing/*.py")


def _planning_bytes() -> int:
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, pattern) for pattern in PLANNING]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


def test_names_a_glob_alias_matches_leave_no_plan_behind(start_gateway: StartGateway) -> None:
    # `claude-sonnet-*` is an alias: every name it matches goes to claude-sonnet-4-5.
    gateway = start_gateway()
    with httpx.Client(base_url=gateway.url, timeout=10) as client:

        def ask(model: str) -> None:
            body = {"model": model, "max_tokens": 5, "messages": HELLO}
            answer = client.post("/v1/messages", json=body, headers={"anthropic-version": "1"})
            assert answer.status_code == 200, answer.text

        ask(CLAUDE)
        ask("claude-sonnet-warm-up")
        tracemalloc.start()
        try:
            before = _planning_bytes()
            for number in range(200):
                ask(f"claude-sonnet-{number:03d}-" + "x" * 238)  # 256 characters, the most
            grown = _planning_bytes() - before
        finally:
            tracemalloc.stop()
    # A kept plan holds its name several times over (about 5 KB each, 1 MB in all); the
    # few plans still held are those of requests whose ledger rows are being written.
    assert grown < 150_000, f"planning kept {grown} bytes for 200 made-up names"
    newest = gateway.rows()[0]
    assert newest["requested_model"] == "claude-sonnet-199-" + "x" * 238
    assert newest["resolved_model"] == CLAUDE
