"""Anthropic streams: an upstream's events read in order, a client's frames written right.

Every frame the writer makes is checked against the SDK's event types, and whole streams
are fed to the SDK's own stream accumulator, as an Anthropic client would read them.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from pydantic import BaseModel, TypeAdapter

from rungway.protocol.api import Api
from rungway.protocol.sse import SseSplitter
from rungway.translate.anthropic import ANTHROPIC
from rungway.translate.canonical import (
    ArgumentsDelta,
    BlockStarted,
    BlockStopped,
    CanonicalUsage,
    Ended,
    Event,
    Finished,
    Request,
    Started,
    Stop,
    StreamError,
    TextDelta,
    ThinkingDelta,
    UsageReported,
)
from tests.unit.translate.recorded import UPSTREAM_STREAM, recorded

REQUEST = Request(model="claude-sonnet-4-5", messages=(), stream=True, temperature_max=1.0)
STREAM_EVENT: TypeAdapter[anthropic.types.RawMessageStreamEvent] = TypeAdapter(
    anthropic.types.RawMessageStreamEvent
)


def frame(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def assert_exact(model: BaseModel) -> None:
    """Fail when the SDK model (or one inside it) holds a field its type does not declare."""
    assert not model.model_extra, f"{type(model).__name__} has unknown fields {model.model_extra}"
    for value in vars(model).values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                assert_exact(item)


def write_all(events: list[Event]) -> list[bytes]:
    """Each event's bytes from one writer, checked to be whole frames."""
    writer = ANTHROPIC.stream_writer(REQUEST)
    outputs = [writer.write(event) for event in events]
    for output in outputs:
        splitter = SseSplitter()
        splitter.feed(output)
        assert splitter.pending == b"", "a write must end on a frame boundary"
    return outputs


def parse(stream: bytes) -> list[dict[str, Any]]:
    """The frames of a written stream, each checked against the SDK's event types."""
    parsed = []
    for event in SseSplitter().feed(stream):
        data = orjson.loads(event.data)
        assert event.event == data["type"], "the event name always equals the data type"
        if data["type"] == "error":
            assert_exact(anthropic.types.ErrorResponse.model_validate(data))
        else:
            assert_exact(STREAM_EVENT.validate_python(data))
        parsed.append(data)
    return parsed


def sdk_client(stream: bytes) -> anthropic.Anthropic:
    """A client whose every request gets `stream` back, one frame per chunk."""
    chunks = [event.raw for event in SseSplitter().feed(stream)]

    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, content=iter(chunks))

    transport = httpx2.MockTransport(handler)
    return anthropic.Anthropic(
        api_key="k",
        base_url="http://gw.test",
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
    )


def sdk_final(stream: bytes) -> dict[str, Any]:
    """The message the SDK's own accumulator builds from `stream`."""
    with sdk_client(stream).messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "q"}]
    ) as events:
        for _ in events:
            pass
        final = events.get_final_message()
    return final.model_dump(mode="json", exclude_none=True)


def read_all(stream: bytes) -> list[Event]:
    reader = ANTHROPIC.stream_reader(REQUEST)
    return [event for sse in SseSplitter().feed(stream) for event in reader.read(sse)]


# Reading an Anthropic upstream

UPSTREAM = recorded(Api.ANTHROPIC_MESSAGES, UPSTREAM_STREAM)
"""A stream with signed thinking, a server tool call (which has no canonical form), text, a
tool call whose arguments come in pieces, and an event type the reader does not know."""


def test_an_anthropic_stream_reads_into_canonical_events() -> None:
    assert read_all(UPSTREAM) == [
        Started(
            "msg_01",
            "claude-sonnet-4-5-20250929",
            CanonicalUsage(input_tokens=25, cache_read_tokens=2000, cache_write_tokens=100),
        ),
        BlockStarted(0, "thinking"),
        ThinkingDelta(0, "Let me think."),
        ThinkingDelta(0, signature="sig-abc"),
        BlockStopped(0),
        BlockStarted(1, "text"),
        TextDelta(1, "Hello"),
        TextDelta(1, " world"),
        BlockStopped(1),
        BlockStarted(2, "tool_call", "toolu_1", "get_weather"),
        ArgumentsDelta(2, '{"city":'),
        ArgumentsDelta(2, ' "Paris"}'),
        BlockStopped(2),
        Finished(Stop.TOOL_USE),
        UsageReported(
            CanonicalUsage(
                input_tokens=25, output_tokens=89, cache_read_tokens=2000, cache_write_tokens=100
            )
        ),
        Ended(),
    ]


def test_usage_repeated_in_message_delta_replaces_message_starts() -> None:
    stream = UPSTREAM.replace(
        b'"usage":{"output_tokens":89}',
        b'"usage":{"output_tokens":89,"input_tokens":30,"cache_read_input_tokens":null}',
    )
    (usage,) = [event for event in read_all(stream) if isinstance(event, UsageReported)]
    assert usage.usage == CanonicalUsage(30, 89, cache_read_tokens=2000, cache_write_tokens=100)


def test_a_stop_sequence_is_named() -> None:
    stream = UPSTREAM.replace(
        b'"stop_reason":"tool_use","stop_sequence":null',
        b'"stop_reason":"stop_sequence","stop_sequence":"###"',
    )
    assert Finished(Stop.STOP_SEQUENCE, "###") in read_all(stream)


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [
        ("overloaded_error", "overloaded"),
        ("rate_limit_error", "rate_limited"),
        ("api_error", "server"),
        ("invalid_request_error", "server"),
    ],
)
def test_an_error_inside_the_stream_is_classified(error_type: str, kind: str) -> None:
    error = {"type": "error", "error": {"type": error_type, "message": "Overloaded"}}
    assert read_all(frame("error", error)) == [StreamError(kind, "Overloaded")]  # type: ignore[arg-type]


def test_odd_blocks_and_events_are_tolerated() -> None:
    stream = b"".join(
        [
            frame(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "redacted_thinking", "data": "x"},
                },
            ),
            frame(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "text", "text": "Hi"},
                },
            ),
            frame("ping", {"type": "ping"}),
            b"event: content_block_delta\ndata: {not json\n\n",
        ]
    )
    assert read_all(stream) == [
        BlockStarted(0, "thinking"),
        BlockStarted(1, "text"),
        TextDelta(1, "Hi"),
        StreamError("server", "unreadable content_block_delta event"),
    ]


# Writing for an Anthropic client


def test_message_delta_waits_for_the_usage_that_follows_the_finish() -> None:
    outputs = write_all(
        [
            Started("chatcmpl-9", "gpt-4o", CanonicalUsage(input_tokens=12, cache_read_tokens=3)),
            BlockStarted(0, "text"),
            TextDelta(0, "Hi"),
            BlockStopped(0),
            Finished(Stop.END),
            UsageReported(CanonicalUsage(input_tokens=12, output_tokens=7, cache_read_tokens=3)),
            Ended(),
        ]
    )
    usage = {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 3}
    assert outputs == [
        frame(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_chatcmpl-9",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "gpt-4o",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": 1, **usage},
                },
            },
        ),
        frame(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        frame(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Hi"},
            },
        ),
        frame("content_block_stop", {"type": "content_block_stop", "index": 0}),
        b"",  # held: the usage chunk comes after the finish reason
        frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"input_tokens": 12, "output_tokens": 7, **usage},
            },
        )
        + frame("message_stop", {"type": "message_stop"}),
        b"",
    ]
    final = sdk_final(b"".join(outputs))
    assert final["usage"] == {"input_tokens": 12, "output_tokens": 7, **usage}
    assert final["content"] == [{"type": "text", "text": "Hi"}]


CHAT_UPSTREAM: list[Event] = [
    Started("chatcmpl-1", "deepseek-reasoner"),
    BlockStarted(0, "thinking"),
    ThinkingDelta(0, "Weather "),
    ThinkingDelta(0, "needed."),
    ThinkingDelta(0, signature="foreign-signature"),
    BlockStarted(1, "text"),  # no stop for block 0: the writer closes it first
    TextDelta(1, "Checking."),
    TextDelta(1, ""),
    BlockStarted(2, "tool_call", "call_1", "get_weather"),
    ArgumentsDelta(2, '{"city"'),
    ArgumentsDelta(2, ""),
    ArgumentsDelta(2, ':"Paris"}'),
    BlockStopped(2),
    BlockStarted(3, "tool_call", "functions.get_time:3", "get_time"),
    BlockStopped(3),
    Finished(Stop.TOOL_USE),
    Finished(Stop.TOOL_USE),  # a duplicate finish chunk changes nothing
    UsageReported(
        CanonicalUsage(input_tokens=40, output_tokens=25, cache_read_tokens=10, reasoning_tokens=9)
    ),
    Ended(),
]


def test_a_chat_upstreams_stream_is_valid_for_anthropic_clients() -> None:
    stream = b"".join(write_all(CHAT_UPSTREAM))
    frames = parse(stream)
    assert [f["type"] for f in frames] == [
        "message_start",
        *[
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
        ],
        *["content_block_start", "content_block_delta", "content_block_stop"],
        *[
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
        ],
        *["content_block_start", "content_block_stop"],
        "message_delta",
        "message_stop",
    ]
    starts = [f["index"] for f in frames if f["type"] == "content_block_start"]
    assert starts == [0, 1, 2, 3]
    open_index = None
    for f in frames:  # one block open at a time, and deltas only into it
        if f["type"] == "content_block_start":
            assert open_index is None
            open_index = f["index"]
        elif f["type"] == "content_block_delta":
            assert f["index"] == open_index
        elif f["type"] == "content_block_stop":
            assert f["index"] == open_index
            open_index = None
    assert sdk_final(stream) == {
        "id": "msg_chatcmpl-1",
        "type": "message",
        "role": "assistant",
        "model": "deepseek-reasoner",
        "content": [
            {"type": "thinking", "thinking": "Weather needed.", "signature": ""},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "functions_get_time_3", "name": "get_time", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 40,
            "output_tokens": 25,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 10,
        },
    }


def test_without_a_usage_chunk_the_end_flushes_what_is_held() -> None:
    outputs = write_all(
        [
            Started("chatcmpl-2", "m", CanonicalUsage(input_tokens=5)),
            BlockStarted(0, "text"),
            TextDelta(0, "partial"),
            Finished(Stop.LENGTH),
            Ended(),
            TextDelta(0, "late"),
        ]
    )
    assert outputs[-1] == b""
    frames = parse(b"".join(outputs))
    assert frames[-2] == {
        "type": "message_delta",
        "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
        "usage": {
            "input_tokens": 5,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    assert frames[-1] == {"type": "message_stop"}


def test_a_stream_that_ends_without_a_finish_still_ends_cleanly() -> None:
    stream = b"".join(write_all([Started("x", "m"), TextDelta(0, "hi"), Ended()]))
    final = sdk_final(stream)
    assert (final["stop_reason"], final["content"]) == (
        "end_turn",
        [{"type": "text", "text": "hi"}],
    )


def test_message_start_comes_first_even_when_started_is_missing() -> None:
    outputs = write_all([BlockStarted(0, "text"), TextDelta(0, "a"), Started("late", "m"), Ended()])
    assert outputs[0].startswith(b"event: message_start\n")
    assert outputs[2] == b""
    assert parse(b"".join(outputs))[0]["message"]["id"] == "msg_rungway"


def test_a_tool_block_waits_until_its_name_is_known() -> None:
    outputs = write_all(
        [
            Started("chatcmpl-3", "glm-5"),
            BlockStarted(0, "text"),
            TextDelta(0, "Let me look."),
            BlockStarted(1, "tool_call", "call_9", None),
            ArgumentsDelta(1, '{"q":'),
            BlockStarted(1, "tool_call", None, "lookup"),
            ArgumentsDelta(1, '"x"}'),
            BlockStopped(1),
            Finished(Stop.TOOL_USE),
            Ended(),
        ]
    )
    assert outputs[3:5] == [b"", b""]
    frames = parse(outputs[5])
    assert frames == [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "call_9", "name": "lookup", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"q":'},
        },
    ]
    final = sdk_final(b"".join(outputs))
    assert final["content"][1] == {
        "type": "tool_use",
        "id": "call_9",
        "name": "lookup",
        "input": {"q": "x"},
    }


def test_a_tool_block_that_never_learns_its_name_is_still_written_whole() -> None:
    stream = b"".join(
        write_all(
            [
                Started("c", "m"),
                BlockStarted(0, "tool_call", "call_1", None),
                ArgumentsDelta(0, "{}"),
                Finished(Stop.TOOL_USE),
                Ended(),
            ]
        )
    )
    content = sdk_final(stream)["content"]
    assert content == [{"type": "tool_use", "id": "call_1", "name": "", "input": {}}]


def test_deltas_without_an_open_block_of_their_own_open_one() -> None:
    stream = b"".join(
        write_all(
            [
                Started("c", "m"),
                BlockStarted(0, "text"),
                TextDelta(0, "a"),
                BlockStarted(1, "tool_call", "call_1", "t"),
                TextDelta(0, "b"),  # block 0 was closed when the tool block opened
                ArgumentsDelta(1, '{"late":1}'),  # its tool block is closed: dropped
                Finished(Stop.END),
                Ended(),
            ]
        )
    )
    assert sdk_final(stream)["content"] == [
        {"type": "text", "text": "a"},
        {"type": "tool_use", "id": "call_1", "name": "t", "input": {}},
        {"type": "text", "text": "b"},
    ]


@pytest.mark.parametrize(
    ("kind", "error_type"),
    [
        ("overloaded", "overloaded_error"),
        ("rate_limited", "rate_limit_error"),
        ("server", "api_error"),
        ("context", "api_error"),
    ],
)
def test_an_error_becomes_an_anthropic_error_event(kind: str, error_type: str) -> None:
    outputs = write_all(
        [
            Started("c", "m"),
            BlockStarted(0, "text"),
            TextDelta(0, "a"),
            StreamError(kind, "upstream went away"),  # type: ignore[arg-type]
            Finished(Stop.END),
            Ended(),
        ]
    )
    assert outputs[-2:] == [b"", b""]
    assert parse(outputs[3]) == [
        {"type": "error", "error": {"type": error_type, "message": "upstream went away"}}
    ]
    with pytest.raises(anthropic.APIStatusError, match="upstream went away"):
        sdk_final(b"".join(outputs))


def test_an_anthropic_stream_read_and_written_again_gives_the_same_message() -> None:
    """The reader and writer agree: what a client accumulates survives the trip, less the
    signature and the server tool blocks."""
    written = b"".join(write_all(read_all(UPSTREAM)))
    parse(written)
    original = sdk_final(UPSTREAM)
    original["content"] = [
        {**block, "signature": ""} if block["type"] == "thinking" else block
        for block in original["content"]
        if block["type"] != "server_tool_use"
    ]
    assert sdk_final(written) == original
