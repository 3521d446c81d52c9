"""Claude Code (`claude -p`) through the gateway: the plan, a tool turn, and the ladder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.clients.conftest import (
    CHEAP_REPLY,
    SUBSCRIPTION_REPLY,
    TOOL_MARKER,
    ClaudeCode,
    StartWorld,
    World,
    inference_requests,
)

pytestmark = pytest.mark.clients

MakeClaude = Callable[[World], ClaudeCode]


def _assert_clean_gateway_calls(world: World) -> None:
    """Claude Code only sent Messages requests, and the gateway answered every one."""
    calls = world.endpoints()
    assert ("POST", "/v1/messages") in {(method, path) for method, path, _ in calls}, calls
    assert all(status == 200 for _, _, status in calls), calls


def test_claude_code_completes_a_prompt_from_the_plan(
    start_world: StartWorld, claude_code: MakeClaude
) -> None:
    world = start_world("claude")

    run = claude_code(world).run("Say hello.")

    assert run.returncode == 0, run.describe()
    assert SUBSCRIPTION_REPLY in run.stdout, run.describe()
    rows = world.rows()
    assert rows, "the gateway recorded no request"
    for row in rows:
        assert (row["rung"], row["connection_id"], row["outcome"]) == (
            "subscription",
            "claude-plan",
            "ok",
        ), row
        assert row["client_key"] == "claude-code", "the CLI's token named the client key"
        assert row["requested_model"] == "auto/thrifty"
    sent = inference_requests(world.subscription)
    assert [request.path for request in sent] == ["/v1/messages"] * len(rows)
    assert all(request.body["stream"] is True for request in sent)
    assert not world.cheap.requests, "nothing reached the cheap rung"
    _assert_clean_gateway_calls(world)


# The command prints the marker without containing it, so only a run command can show it.
BASH_CALL: dict[str, Any] = {
    "name": "Bash",
    "input": {
        "command": "printf '%s-%s\\n' rungway-tool ok",
        "description": "Print the rungway marker",
    },
}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def test_claude_code_runs_the_bash_tool_the_plan_asks_for(
    start_world: StartWorld, claude_code: MakeClaude
) -> None:
    world = start_world("claude", tool_calls=[BASH_CALL])

    run = claude_code(world).run(
        "Run the command that prints the rungway marker.", "--allowedTools", "Bash"
    )

    assert run.returncode == 0, run.describe()
    sent = inference_requests(world.subscription)
    assert len(sent) == 2, [request.body for request in sent]
    follow_up = sent[1].body["messages"]
    calls = [
        block
        for message in follow_up
        if message.get("role") == "assistant"
        for block in _blocks(message)
        if block.get("type") == "tool_use"
    ]
    assert [call["name"] for call in calls] == ["Bash"], calls
    assert calls[0]["input"]["command"] == BASH_CALL["input"]["command"]
    results = [
        block
        for message in follow_up
        if message.get("role") == "user"
        for block in _blocks(message)
        if block.get("type") == "tool_result"
    ]
    assert len(results) == 1, results
    assert results[0]["tool_use_id"] == calls[0]["id"]
    assert not results[0].get("is_error"), results[0]
    assert TOOL_MARKER in _text(results[0]["content"]), results[0]
    # The plan's last turn quotes the tool's output, and Claude Code prints it.
    assert TOOL_MARKER in run.stdout, run.describe()
    rows = world.rows()
    assert len(rows) == 2
    assert {(row["rung"], row["connection_id"], row["outcome"]) for row in rows} == {
        ("subscription", "claude-plan", "ok")
    }
    assert not world.cheap.requests
    _assert_clean_gateway_calls(world)


def test_claude_code_moves_to_the_cheap_rung_when_the_plan_is_spent(
    start_world: StartWorld, claude_code: MakeClaude
) -> None:
    world = start_world("claude")
    claude = claude_code(world)
    first = claude.run("Say hello.")
    assert first.returncode == 0, first.describe()
    assert SUBSCRIPTION_REPLY in first.stdout, first.describe()
    served_by_subscription = len(world.rows())

    world.exhaust_subscription()
    run = claude.run("Say hello again.")

    assert run.returncode == 0, run.describe()
    assert CHEAP_REPLY in run.stdout, run.describe()
    rows = world.rows()
    rows = rows[: len(rows) - served_by_subscription]
    assert rows, "the second run recorded no request"
    for row in rows:
        assert (row["rung"], row["connection_id"], row["outcome"]) == ("cheap", "cheap", "ok"), row
        assert row["api"] == "anthropic_messages", "the client still spoke Anthropic Messages"
    # The spent plan is asked once: its window covers every model, so neither its other
    # model in that request nor any later request tries it again.
    tried = [attempt for row in rows for attempt in row["attempts"]]
    assert [attempt["outcome"] for attempt in tried] == ["quota_exhausted"], tried
    sent = inference_requests(world.cheap)
    # Claude Code asks for more output than the cheap model allows: each request is refused
    # once with the model's limit and retried within it.
    assert [request.path for request in sent] == ["/v1/chat/completions"] * 2 * len(rows)
    assert [request.body["max_tokens"] for request in sent[1::2]] == [8192] * len(rows)
    assert all(request.body["max_tokens"] > 8192 for request in sent[::2])
    for request in sent:
        assert request.body["model"] == "deepseek-chat"
        assert request.body["messages"], "a translated Chat Completions body"
    _assert_clean_gateway_calls(world)
