"""A stream commits at the first event a user would see, in every API.

The simulated upstreams render each API's real stream; the watchers must hold back every
event before the first word of text or the tool call's name, and no later.
"""

from __future__ import annotations

from typing import Any

import pytest

from rungway.adapters.anthropic.messages import AnthropicMessagesAdapter
from rungway.adapters.base import EventKind
from rungway.adapters.openai.chat import OpenAIChatAdapter
from rungway.adapters.openai.responses import OpenAIResponsesAdapter
from rungway.clock import FakeClock
from rungway.protocol import visible
from rungway.protocol.sse import SseSplitter
from rungway.sim.scenario import Scenario
from rungway.sim.wire.anthropic_api import AnthropicDialect
from rungway.sim.wire.completion import ToolTurn, plan_completion
from rungway.sim.wire.openai_api import OpenAIDialect
from rungway.sim.wire.responses_api import ResponsesDialect
from rungway.sim.wire.serving import GenerationRequest

TOOL = "Bash"


def _scenario(api: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": api,
            "api": api,
            "quota_headers": "none",
            "auth": {"kind": "none"},
            "models": [{"id": "m"}],
            "response": {
                "output_tokens": 12,
                "chunk_tokens": 3,
                "tool_calls": [{"name": TOOL, "input": {"command": "echo hi"}}],
            },
        }
    )


def _frames(api: str, *, tool: bool) -> tuple[list[bytes], str]:
    """The upstream's stream frames, and the first thing in them a user would see."""
    scenario = _scenario(api)
    tools = ToolTurn(frozenset({TOOL})) if tool else ToolTurn()
    completion = plan_completion(scenario.response, 5, None, tools)
    request = GenerationRequest("m", True, None, 5, {}, "req_1", tools)
    dialect: Any = (
        AnthropicDialect(scenario)
        if api == "anthropic"
        else (ResponsesDialect if api == "responses" else OpenAIDialect)(scenario, FakeClock(0))
    )
    first = TOOL if tool else completion.pieces[0].strip()
    return dialect.stream_frames(request, completion), first


WATCHERS: dict[str, Any] = {
    "anthropic": AnthropicMessagesAdapter(),
    "openai": OpenAIChatAdapter(),
    "responses": OpenAIResponsesAdapter(),
}


@pytest.mark.parametrize("tool", [False, True], ids=["text", "tool_call"])
@pytest.mark.parametrize("api", sorted(WATCHERS))
def test_the_stream_commits_at_the_first_visible_event(api: str, tool: bool) -> None:
    frames, first = _frames(api, tool=tool)
    watcher = WATCHERS[api].watch_stream(strip_usage_chunk=False)
    kinds = [watcher.see(event) for event in SseSplitter().feed(b"".join(frames))]
    shown = next(i for i, frame in enumerate(frames) if first.encode() in frame)
    assert kinds[:shown] == [EventKind.PREAMBLE] * shown
    assert kinds[shown] is EventKind.CONTENT
    assert watcher.finished


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("message_start", b'{"type":"message_start","message":{"content":[]}}'),
        ("content_block_start", b'{"index":0,"content_block":{"type":"text","text":""}}'),
        ("content_block_start", b'{"index":0,"content_block":{"type":"thinking","thinking":""}}'),
        ("content_block_delta", b'{"index":0,"delta":{"type":"text_delta","text":""}}'),
        (
            "content_block_delta",
            b'{"index":0,"delta":{"type":"input_json_delta","partial_json":""}}',
        ),
        ("content_block_delta", b'{"index":0,"delta":{"type":"signature_delta","signature":"x"}}'),
        ("content_block_stop", b'{"index":0}'),
        ("message_delta", b'{"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":0}}'),
        ("ping", b'{"type":"ping"}'),
    ],
)
def test_anthropic_events_that_show_nothing(name: str, data: bytes) -> None:
    assert not visible.anthropic(name, data)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("content_block_delta", b'{"delta":{"type":"thinking_delta","thinking":"Hm"}}'),
        ("content_block_start", b'{"content_block":{"type":"tool_use","name":"Bash"}}'),
    ],
)
def test_thinking_and_a_tool_name_show(name: str, data: bytes) -> None:
    assert visible.anthropic(name, data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"choices":[{"delta":{"role":"assistant","content":""},"finish_reason":null}]}',
        b'{"choices":[{"delta":{},"finish_reason":"stop"}]}',
        b'{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0}}',
        b'{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}',
    ],
)
def test_chat_chunks_that_show_nothing(data: bytes) -> None:
    assert not visible.chat(data)


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("response.output_item.added", b'{"item":{"type":"message","content":[]}}'),
        ("response.content_part.added", b'{"part":{"type":"output_text","text":""}}'),
        ("response.output_text.delta", b'{"delta":""}'),
        ("response.output_item.done", b'{"item":{"type":"reasoning","summary":[]}}'),
    ],
)
def test_responses_events_that_show_nothing(kind: str, data: bytes) -> None:
    assert not visible.responses(kind, data)


def test_reasoning_summary_text_shows() -> None:
    assert visible.responses("response.reasoning_summary_text.delta", b'{"delta":"Hm"}')
    assert visible.chat(b'{"choices":[{"delta":{"reasoning_content":"Hm"}}]}')
