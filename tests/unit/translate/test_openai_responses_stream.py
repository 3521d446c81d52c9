"""Responses streams: upstream events read into canonical events, and canonical events
written as a stream a Responses client (and the openai SDK) reads."""

from __future__ import annotations

import itertools
from typing import Any

import httpx2
import openai
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseFailedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseStreamEvent,
)
from pydantic import TypeAdapter

from rungway.protocol.api import Api
from rungway.protocol.sse import SseSplitter, encode_event
from rungway.translate.canonical import (
    ArgumentsDelta,
    BlockStarted,
    BlockStopped,
    CanonicalUsage,
    Ended,
    Event,
    Finished,
    Message,
    Request,
    Started,
    Stop,
    StreamError,
    Text,
    TextDelta,
    Thinking,
    ThinkingDelta,
    Tool,
    ToolCall,
    UsageReported,
)
from rungway.translate.names import short_tool_name
from rungway.translate.openai_responses import OPENAI_RESPONSES
from rungway.translate.openai_responses_stream import ANTHROPIC_SIGNATURE
from tests.unit.translate.recorded import UPSTREAM_STREAM, recorded

STREAM_EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
LONG_NAME = "mcp__workspace_server__" + "search_every_document_in_the_shared_drive_" * 2
REQUEST = Request(
    model="client-model",
    messages=(Message("user", (Text("hi"),)),),
    tools=(Tool(LONG_NAME, None, {"type": "object"}), Tool("shell", "runs", {"type": "object"})),
)


def read(raw: bytes, request: Request = REQUEST) -> list[Event]:
    """Every canonical event the reader makes of these upstream bytes."""
    reader = OPENAI_RESPONSES.stream_reader(request)
    events: list[Event] = []
    for event in SseSplitter().feed(raw):
        events += reader.read(event)
    return events


def upstream(kind: str, **fields: Any) -> bytes:
    """One upstream frame."""
    return encode_event({"type": kind, "sequence_number": 0, **fields}, kind)


def completed(status: str = "completed", **fields: Any) -> bytes:
    """A terminal `response.completed` (or other) frame with usage."""
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 60},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 5},
        "total_tokens": 120,
    }
    kind = "response.completed" if status == "completed" else f"response.{status}"
    return upstream(kind, response={"id": "resp_1", "status": status, "usage": usage, **fields})


UPSTREAM_USAGE = CanonicalUsage(
    input_tokens=40, output_tokens=20, cache_read_tokens=60, reasoning_tokens=5
)


def test_a_recorded_upstream_stream_reads_into_blocks() -> None:
    raw = recorded(Api.OPENAI_RESPONSES, UPSTREAM_STREAM)
    assert read(raw) == [
        Started(id="resp_77b1", model="gpt-5-codex", created=1756000100),
        BlockStarted(0, "thinking"),
        ThinkingDelta(0, "**Reading"),
        ThinkingDelta(0, " the repo**"),
        ThinkingDelta(0, "\n\nThen list."),
        BlockStopped(0),
        BlockStarted(1, "text"),
        TextDelta(1, "Listing"),
        TextDelta(1, " files."),
        BlockStopped(1),
        BlockStarted(2, "tool_call", "call_S1", "shell"),
        ArgumentsDelta(2, '{"command":'),
        ArgumentsDelta(2, '["ls"]}'),
        BlockStopped(2),
        Finished(Stop.TOOL_USE),
        UsageReported(
            CanonicalUsage(
                input_tokens=904, output_tokens=240, cache_read_tokens=4096, reasoning_tokens=192
            )
        ),
        Ended(),
    ]


@given(st.lists(st.integers(min_value=0, max_value=6000), max_size=8))
def test_any_split_of_the_upstream_bytes_reads_the_same(cuts: list[int]) -> None:
    raw = recorded(Api.OPENAI_RESPONSES, UPSTREAM_STREAM)
    splitter = SseSplitter()
    reader = OPENAI_RESPONSES.stream_reader(REQUEST)
    events: list[Event] = []
    points = [0, *sorted(cut for cut in cuts if cut < len(raw)), len(raw)]
    for start, end in itertools.pairwise(points):
        for event in splitter.feed(raw[start:end]):
            events += reader.read(event)
    assert events == read(raw)


def test_items_that_arrive_whole_are_read_from_their_done_event() -> None:
    call = {
        "type": "function_call",
        "call_id": "c1",
        "name": short_tool_name(LONG_NAME),
        "arguments": "{}",
    }
    events = read(
        upstream("response.output_item.added", output_index=0, item=call | {"arguments": ""})
        + upstream("response.output_item.done", output_index=0, item=call)
        + upstream(
            "response.output_item.done",
            output_index=1,
            item={"type": "message", "content": [{"type": "output_text", "text": "whole"}]},
        )
        + upstream("response.output_item.added", output_index=2, item={"type": "message"})
        + upstream(
            "response.output_item.done", output_index=2, item={"type": "message", "content": []}
        )
        + completed()
    )
    assert events == [
        BlockStarted(0, "tool_call", "c1", LONG_NAME),
        ArgumentsDelta(0, "{}"),
        BlockStopped(0),
        BlockStarted(1, "text"),
        TextDelta(1, "whole"),
        BlockStopped(1),
        Finished(Stop.TOOL_USE),
        UsageReported(UPSTREAM_USAGE),
        Ended(),
    ]


@pytest.mark.parametrize(
    ("reason", "stop"), [("max_output_tokens", Stop.LENGTH), ("content_filter", Stop.FILTERED)]
)
def test_an_incomplete_response_says_why(reason: str, stop: Stop) -> None:
    events = read(
        upstream("response.output_text.delta", output_index=0, delta="cut")
        + completed("incomplete", incomplete_details={"reason": reason})
    )
    assert events == [
        BlockStarted(0, "text"),
        TextDelta(0, "cut"),
        BlockStopped(0),
        Finished(stop),
        UsageReported(UPSTREAM_USAGE),
        Ended(),
    ]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": "rate_limit_exceeded", "message": "slow"}, "rate_limited"),
        ({"type": "usage_limit_reached", "message": "slow"}, "rate_limited"),
        ({"code": "server_is_overloaded", "message": "slow"}, "overloaded"),
        ({"code": "slow_down", "message": "slow"}, "overloaded"),
        ({"code": "context_length_exceeded", "message": "slow"}, "context"),
        ({"code": "insufficient_quota", "message": "slow"}, "billing"),
        ({"code": "invalid_prompt", "message": "slow"}, "bad_request"),
        ({"code": "server_error", "message": "slow"}, "server"),
        ({"code": None, "message": "slow"}, "server"),
    ],
)
def test_failures_become_stream_errors(error: dict[str, Any], kind: str) -> None:
    failed = upstream(
        "response.failed", response={"id": "resp_1", "status": "failed", "error": error}
    )
    assert read(failed) == [StreamError(kind, "slow")]  # type: ignore[arg-type]
    if "type" not in error:  # a top-level error event's own type is `error`
        top_level = upstream("error", param=None, **error)
        assert read(top_level) == [StreamError(kind, "slow")]  # type: ignore[arg-type]


def test_preamble_and_unknown_events_read_as_nothing() -> None:
    raw = (
        upstream("response.in_progress", response={})
        + b'event: codex.rate_limits\ndata: {"type":"codex.rate_limits"}\n\n'
        + upstream("response.some_future_event")
        + upstream("response.output_item.added", output_index=0, item={"type": "web_search_call"})
        + b"event: response.output_text.delta\ndata: not json\n\n"
    )
    assert read(raw) == []


EVENTS: list[Event] = [
    Started("msg_01", "claude-x", CanonicalUsage(input_tokens=9), 1700000000),
    BlockStarted(0, "thinking"),
    ThinkingDelta(0, "Let me "),
    ThinkingDelta(0, "think."),
    ThinkingDelta(0, signature="sig-abc"),
    BlockStopped(0),
    BlockStarted(1, "text"),
    TextDelta(1, "Hel"),
    TextDelta(1, "lo"),
    BlockStopped(1),
    BlockStarted(2, "tool_call", "toolu_1", LONG_NAME),
    ArgumentsDelta(2, ""),
    ArgumentsDelta(2, '{"q":'),
    ArgumentsDelta(2, '"x"}'),
    BlockStopped(2),
    BlockStarted(3, "tool_call", "toolu_2", "shell"),
    BlockStopped(3),
    Finished(Stop.TOOL_USE),
    UsageReported(
        CanonicalUsage(input_tokens=9, output_tokens=30, cache_read_tokens=100, reasoning_tokens=4)
    ),
    Ended(),
]


def write(events: list[Event], request: Request = REQUEST) -> list[bytes]:
    """The writer's bytes for each event, one by one."""
    writer = OPENAI_RESPONSES.stream_writer(request)
    return [writer.write(event) for event in events]


def frames(raw: bytes) -> list[dict[str, Any]]:
    """Every frame's data, each checked against the SDK's event types and its frame name."""
    events = SseSplitter().feed(raw)
    assert b"".join(event.raw for event in events) == raw
    datas = [orjson.loads(event.data) for event in events]
    for event, data in zip(events, datas, strict=True):
        assert event.event == data["type"]
        STREAM_EVENT.validate_python(data)
    return datas


def test_the_writer_frames_every_block_for_a_responses_client() -> None:
    chunks = write(EVENTS)
    for chunk in chunks:
        frames(chunk)  # each write is complete frames on its own
    assert chunks[-3:] == [b"", chunks[-2], b""]  # held at Finished, sent with the usage
    datas = frames(b"".join(chunks))
    assert [data["sequence_number"] for data in datas] == list(range(len(datas)))
    assert [data["type"] for data in datas] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = [data["item"] for data in datas if data["type"] == "response.output_item.done"]
    reasoning = ResponseReasoningItem.model_validate(done[0])
    assert reasoning.summary[0].text == "Let me think."
    assert reasoning.encrypted_content == ANTHROPIC_SIGNATURE + "sig-abc"
    message = ResponseOutputMessage.model_validate(done[1])
    assert message.content[0].type == "output_text"
    assert message.content[0].text == "Hello"
    calls = [ResponseFunctionToolCall.model_validate(item) for item in done[2:]]
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [
        ("toolu_1", LONG_NAME, '{"q":"x"}'),
        ("toolu_2", "shell", "{}"),
    ]
    final = ResponseCompletedEvent.model_validate(datas[-1]).response
    assert final.id == datas[0]["response"]["id"] == "resp_msg_01"
    assert final.status == "completed"
    assert final.model == "claude-x"
    assert final.created_at == 1700000000
    assert [item.model_dump(exclude_none=True) for item in final.output] == [
        ResponseReasoningItem.model_validate(done[0]).model_dump(exclude_none=True),
        message.model_dump(exclude_none=True),
        *[call.model_dump(exclude_none=True) for call in calls],
    ]
    assert final.usage is not None
    assert final.usage.model_dump(exclude_none=True) == {
        "input_tokens": 109,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 139,
    }
    assert [tool.model_dump()["name"] for tool in final.tools] == [LONG_NAME, "shell"]
    assert b"[DONE]" not in b"".join(chunks)


def test_item_ids_are_unique_and_match_their_events() -> None:
    datas = frames(b"".join(write(EVENTS)))
    ids = {data["item"]["id"] for data in datas if data["type"] == "response.output_item.added"}
    assert len(ids) == 4
    for data in datas:
        if "item_id" in data:
            assert data["item_id"] in ids
    added = [data for data in datas if data["type"] == "response.output_item.added"]
    assert [data["output_index"] for data in added] == [0, 1, 2, 3]


def test_without_usage_the_end_flushes_the_completed_response() -> None:
    events: list[Event] = [
        Started("chatcmpl-1", "deepseek-chat"),
        BlockStarted(0, "text"),
        TextDelta(0, "cut"),
        Finished(Stop.LENGTH),
        Ended(),
    ]
    chunks = write(events)
    assert chunks[3] == b""
    datas = frames(b"".join(chunks))
    # The open block is closed before the response completes.
    assert [data["type"] for data in datas[-4:]] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = ResponseCompletedEvent.model_validate(datas[-1]).response
    assert final.status == "incomplete"
    assert final.incomplete_details is not None
    assert final.incomplete_details.reason == "max_output_tokens"
    assert final.output_text == "cut"


def test_a_stream_with_no_started_event_still_opens_the_response() -> None:
    datas = frames(b"".join(write([TextDelta(0, "hi"), Ended()])))
    assert datas[0]["type"] == "response.created"
    assert datas[0]["response"]["id"].startswith("resp_")
    final = ResponseCompletedEvent.model_validate(datas[-1]).response
    assert (final.status, final.output_text) == ("completed", "hi")


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("rate_limited", "rate_limit_exceeded"),
        ("overloaded", "server_error"),
        ("bad_request", "invalid_prompt"),
    ],
)
def test_a_stream_error_fails_the_same_response(kind: str, code: str) -> None:
    events: list[Event] = [
        Started("msg_1", "claude-x"),
        BlockStarted(0, "text"),
        TextDelta(0, "par"),
        StreamError(kind, "Overloaded"),  # type: ignore[arg-type]
        TextDelta(0, "tial"),
        Ended(),
    ]
    chunks = write(events)
    assert chunks[-2:] == [b"", b""]
    datas = frames(b"".join(chunks))
    failed = ResponseFailedEvent.model_validate(datas[-1])
    assert failed.response.id == datas[0]["response"]["id"]
    assert failed.response.status == "failed"
    assert failed.response.error is not None
    assert (failed.response.error.code, failed.response.error.message) == (code, "Overloaded")
    assert failed.sequence_number == len(datas) - 1


def sdk(body: bytes) -> openai.OpenAI:
    """An openai client that receives `body` as an event stream for any request."""
    headers = {"content-type": "text/event-stream"}
    transport = httpx2.MockTransport(lambda _: httpx2.Response(200, content=body, headers=headers))
    return openai.OpenAI(
        base_url="http://gateway.test/v1",
        api_key="k",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )


def test_the_openai_sdk_consumes_a_written_stream() -> None:
    client = sdk(b"".join(write(EVENTS)))
    events = list(client.responses.create(model="m", input="hi", stream=True))
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert isinstance(events[-1], ResponseCompletedEvent)
    assert events[-1].response.output_text == "Hello"
    with client.responses.stream(model="m", input="hi") as stream:
        text = "".join(
            event.delta for event in stream if event.type == "response.output_text.delta"
        )
        final = stream.get_final_response()
    assert text == "Hello"
    assert final.id == "resp_msg_01"
    assert final.usage is not None
    assert final.usage.total_tokens == 139
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(call.call_id, call.arguments) for call in calls] == [
        ("toolu_1", '{"q":"x"}'),
        ("toolu_2", "{}"),
    ]


def test_the_next_turn_carries_the_calls_and_signed_thinking_back() -> None:
    datas = frames(b"".join(write(EVENTS)))
    output = datas[-1]["response"]["output"]
    request = OPENAI_RESPONSES.read_request({"model": "m", "input": output})
    (turn,) = request.messages
    assert turn.parts == (
        Thinking("Let me think.", signature="sig-abc", origin="anthropic"),
        Text("Hello"),
        ToolCall("toolu_1", LONG_NAME, '{"q":"x"}'),
        ToolCall("toolu_2", "shell", "{}"),
    )


def test_usage_before_the_finish_waits_for_the_end() -> None:
    usage = CanonicalUsage(input_tokens=5, output_tokens=2)
    events: list[Event] = [
        Started("chatcmpl-2", "m"),
        TextDelta(0, "a"),
        UsageReported(usage),
        TextDelta(0, "b"),
        Finished(Stop.END),
        Ended(),
    ]
    chunks = write(events)
    assert chunks[2] == chunks[4] == b""
    final = ResponseCompletedEvent.model_validate(frames(b"".join(chunks))[-1]).response
    assert final.output_text == "ab"
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (5, 2)
