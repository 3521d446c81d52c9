"""Chat Completions streams: upstream chunks read into canonical events, events written as
chunks a Chat client (and the openai SDK) reads."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletionChunk

from rungway.protocol.sse import SseSplitter
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
    ThinkingDelta,
    Tool,
    UsageReported,
)
from rungway.translate.names import short_tool_name
from rungway.translate.openai_chat import OPENAI_CHAT

LONG_NAME = "mcp__workspace_server__" + "search_every_document_in_the_shared_drive_" * 2
REQUEST = Request(
    model="m",
    messages=(Message("user", (Text("hi"),)),),
    tools=(Tool(LONG_NAME, None, {"type": "object"}), Tool("get", None, {"type": "object"})),
)
USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 20,
    "total_tokens": 120,
    "prompt_tokens_details": {"cached_tokens": 60},
    "completion_tokens_details": {"reasoning_tokens": 5},
}
CANONICAL_USAGE = CanonicalUsage(
    input_tokens=40, output_tokens=20, cache_read_tokens=60, reasoning_tokens=5
)
STARTED = Started(id="chatcmpl-1", model="deepseek-chat", created=1700000000)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> bytes:
    """One upstream frame: a choice with `delta` (none when `delta` is None), plus `extra`."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "deepseek-chat",
        "choices": choices,
        **extra,
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def call(index: int, **fields: Any) -> dict[str, Any]:
    """A delta carrying one tool-call fragment."""
    return {"tool_calls": [{"index": index, **fields}]}


def read(*frames: bytes, request: Request = REQUEST) -> list[Event]:
    """Every canonical event the reader makes of these upstream bytes."""
    reader = OPENAI_CHAT.stream_reader(request)
    events: list[Event] = []
    for event in SseSplitter().feed(b"".join(frames)):
        events += reader.read(event)
    return events


ROLE = chunk({"role": "assistant", "content": ""})
DONE = b"data: [DONE]\n\n"

# stream_reader


def test_a_text_stream_with_its_usage_chunk() -> None:
    frames = [
        ROLE,
        b": keep-alive\n\n",
        chunk({"content": "Hel"}, usage=None),
        b"\r\n",
        chunk({"content": "lo"}),
        chunk({}, "stop"),
        chunk(None, usage=USAGE),
        DONE,
    ]
    assert read(*frames) == [
        STARTED,
        BlockStarted(0, "text"),
        TextDelta(0, "Hel"),
        TextDelta(0, "lo"),
        BlockStopped(0),
        Finished(Stop.END),
        UsageReported(CANONICAL_USAGE),
        Ended(),
    ]


def test_reasoning_text_and_parallel_calls_open_one_block_at_a_time() -> None:
    frames = [
        ROLE,
        chunk({"reasoning_content": "think"}),
        chunk({"reasoning": "ing"}),
        chunk({"content": "Let me look."}),
        chunk(call(0, id="call_a", type="function", function={"name": "get", "arguments": ""})),
        chunk(call(0, function={"arguments": '{"q":'})),
        chunk(call(0, function={"arguments": '"x"}'})),
        chunk(call(1, id="call_b", type="function", function={"name": "get", "arguments": "{}"})),
        chunk({}, "tool_calls"),
        DONE,
    ]
    assert read(*frames) == [
        STARTED,
        BlockStarted(0, "thinking"),
        ThinkingDelta(0, "think"),
        ThinkingDelta(0, "ing"),
        BlockStopped(0),
        BlockStarted(1, "text"),
        TextDelta(1, "Let me look."),
        BlockStopped(1),
        BlockStarted(2, "tool_call", call_id="call_a", name="get"),
        ArgumentsDelta(2, '{"q":'),
        ArgumentsDelta(2, '"x"}'),
        BlockStopped(2),
        BlockStarted(3, "tool_call", call_id="call_b", name="get"),
        ArgumentsDelta(3, "{}"),
        BlockStopped(3),
        Finished(Stop.TOOL_USE),
        Ended(),
    ]


def test_a_call_opens_only_once_its_id_and_name_are_both_known() -> None:
    short = short_tool_name(LONG_NAME)
    frames = [
        ROLE,
        chunk(call(0, type="function", function={"name": short, "arguments": ""})),
        chunk(call(0, function={"arguments": '{"q":'})),
        chunk(call(0, id="call_late", function={"arguments": '"x"'})),
        chunk(call(0, function={"arguments": "}"})),
        chunk({}, "tool_calls"),
    ]
    assert read(*frames)[1:] == [
        BlockStarted(0, "tool_call", call_id="call_late", name=LONG_NAME),
        ArgumentsDelta(0, '{"q":"x"'),
        ArgumentsDelta(0, "}"),
        BlockStopped(0),
        Finished(Stop.TOOL_USE),
    ]


def test_snapshot_arguments_and_a_repeated_whole_become_deltas_once() -> None:
    frames = [
        chunk(call(0, id="c", function={"name": "get", "arguments": '{"q"'})),
        chunk(call(0, function={"arguments": '{"q":"x"'})),
        chunk(call(0, function={"arguments": '{"q":"x"}'})),
        chunk(call(0, function={"arguments": '{"q":"x"}'})),
        chunk({}, "tool_calls"),
    ]
    deltas = [e for e in read(*frames) if isinstance(e, ArgumentsDelta)]
    assert deltas == [ArgumentsDelta(0, '{"q"'), ArgumentsDelta(0, ':"x"'), ArgumentsDelta(0, "}")]


def test_a_repeated_finish_chunk_finishes_once_and_usage_on_it_is_kept() -> None:
    frames = [ROLE, chunk({"content": "x"}), chunk({}, "stop"), chunk({}, "stop", usage=USAGE)]
    events = read(*frames, DONE)
    assert [e for e in events if isinstance(e, Finished)] == [Finished(Stop.END)]
    assert events[-2:] == [UsageReported(CANONICAL_USAGE), Ended()]


def test_an_index_reused_for_a_new_id_and_calls_without_index_are_separate_calls() -> None:
    frames = [
        chunk(call(0, id="c1", function={"name": "get", "arguments": "{}"})),
        chunk(call(0, id="c2", function={"name": "get", "arguments": '{"a":1}'})),
        chunk({"tool_calls": [{"id": "c3", "function": {"name": "get", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
        chunk({}, "stop"),
    ]
    events = read(*frames)
    assert [e.call_id for e in events if isinstance(e, BlockStarted)] == ["c1", "c2", "c3"]
    assert events[-3:] == [ArgumentsDelta(2, "}"), BlockStopped(2), Finished(Stop.TOOL_USE)]


def test_without_an_index_a_call_whose_id_comes_after_its_name_stays_one_call() -> None:
    frames = [
        chunk({"tool_calls": [{"function": {"name": "get", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"id": "c1", "function": {"arguments": "}"}}]}),
        chunk({"tool_calls": [{"id": "c2", "function": {"name": "get", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
    ]
    assert read(*frames)[1:] == [
        BlockStarted(0, "tool_call", call_id="c1", name="get"),
        ArgumentsDelta(0, "{}"),
        BlockStopped(0),
        BlockStarted(1, "tool_call", call_id="c2", name="get"),
        ArgumentsDelta(1, "{}"),
        BlockStopped(1),
        Finished(Stop.TOOL_USE),
    ]


@pytest.mark.parametrize(
    ("frames", "tail"),
    [
        ([ROLE, chunk({"content": "cut"})], [BlockStopped(0), Finished(Stop.END), Ended()]),
        (
            [chunk(call(0, function={"name": "get", "arguments": "{}"}))],
            [
                BlockStarted(0, "tool_call", call_id="call_0", name="get"),
                ArgumentsDelta(0, "{}"),
                BlockStopped(0),
                Finished(Stop.TOOL_USE),
                Ended(),
            ],
        ),
        ([], [Started(id="", model="m"), Finished(Stop.END), Ended()]),
    ],
)
def test_done_closes_what_is_open_and_finishes_when_no_finish_came(
    frames: list[bytes], tail: list[Event]
) -> None:
    assert read(*frames, DONE)[-len(tail) :] == tail


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"},
            "rate_limited",
        ),
        ({"message": "pay", "type": "insufficient_quota", "code": "insufficient_quota"}, "billing"),
        (
            {"message": "long", "type": "invalid_request_error", "code": "context_length_exceeded"},
            "context",
        ),
        ({"message": "bad", "type": "invalid_request_error", "code": None}, "bad_request"),
        ({"message": "Overloaded", "code": 529}, "overloaded"),
        ({"message": "Provider returned error", "code": 502}, "server"),
        ({"message": "who", "code": 401}, "auth"),
    ],
)
def test_an_error_chunk_becomes_a_stream_error_and_ends_the_stream(
    error: dict[str, Any], kind: str
) -> None:
    error_frame = b"data: " + orjson.dumps({"error": error}) + b"\n\n"
    frames = [ROLE, chunk({"content": "x"}), error_frame, chunk({"content": "y"}), DONE]
    assert read(*frames)[-2:] == [StreamError(kind, error["message"]), Ended()]  # type: ignore[arg-type]


def test_content_after_the_finish_and_unreadable_data_are_ignored() -> None:
    frames = [ROLE, chunk({}, "length"), chunk({"content": "late"}), b"data: {oops\n\n", DONE]
    assert read(*frames) == [STARTED, Finished(Stop.LENGTH), Ended()]


# stream_writer


def write(events: list[Event], request: Request = REQUEST) -> list[bytes]:
    """The writer's bytes for each event, each checked to be whole SSE frames."""
    writer = OPENAI_CHAT.stream_writer(request)
    out = []
    for event in events:
        data = writer.write(event)
        splitter = SseSplitter()
        assert len(splitter.feed(data)) == data.count(b"\n\n")
        assert splitter.pending == b""
        out.append(data)
    return out


def chunks(data: bytes) -> list[dict[str, Any]]:
    """Every chunk in `data` (validated with the SDK's type), with `[DONE]` as {"done": 1}."""
    parsed: list[dict[str, Any]] = []
    for event in SseSplitter().feed(data):
        assert event.event is None
        if event.data == b"[DONE]":
            parsed.append({"done": 1})
            continue
        body = orjson.loads(event.data)
        if "error" not in body:
            ChatCompletionChunk.model_validate(body)
        parsed.append(body)
    return parsed


TEXT_EVENTS: list[Event] = [
    Started(id="msg_1", model="claude-x", created=1700000000),
    BlockStarted(0, "text"),
    TextDelta(0, "Hi"),
    BlockStopped(0),
    Finished(Stop.END),
    UsageReported(CanonicalUsage(input_tokens=5, output_tokens=2, cache_read_tokens=3)),
    Ended(),
]

HEAD = (
    b'data: {"id":"chatcmpl-msg_1","object":"chat.completion.chunk","created":1700000000,'
    b'"model":"claude-x","choices":[{"index":0,"delta":'
)


def test_a_text_stream_byte_for_byte() -> None:
    assert write(TEXT_EVENTS) == [
        HEAD + b'{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n',
        b"",
        HEAD + b'{"content":"Hi"},"logprobs":null,"finish_reason":null}]}\n\n',
        b"",
        b"",
        HEAD + b'{},"logprobs":null,"finish_reason":"stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]


def test_with_include_usage_every_chunk_has_null_usage_and_the_usage_chunk_follows_finish() -> None:
    request = Request(model="m", messages=(), include_usage=True)
    out = write(TEXT_EVENTS, request)
    assert out[4] == b""  # the finish chunk waits for the usage
    parsed = chunks(b"".join(out))
    assert [c.get("usage", "absent") for c in parsed] == [None, None, None, USAGE_OUT, "absent"]
    assert parsed[2]["choices"][0]["finish_reason"] == "stop"
    assert parsed[3]["choices"] == []


USAGE_OUT = {
    "prompt_tokens": 8,
    "completion_tokens": 2,
    "total_tokens": 10,
    "prompt_tokens_details": {"cached_tokens": 3},
    "completion_tokens_details": {"reasoning_tokens": 0},
}

TOOL_EVENTS: list[Event] = [
    Started(id="msg_2", model="claude-x"),
    BlockStarted(0, "thinking"),
    ThinkingDelta(0, "hmm"),
    ThinkingDelta(0, signature="sig"),
    BlockStopped(0),
    BlockStarted(1, "text"),
    TextDelta(1, "Checking."),
    BlockStopped(1),
    BlockStarted(2, "tool_call", call_id="toolu_1", name="get"),
    ArgumentsDelta(2, ""),
    ArgumentsDelta(2, '{"q":'),
    ArgumentsDelta(2, '"x"}'),
    BlockStopped(2),
    BlockStarted(3, "tool_call", call_id="toolu_2", name="now"),
    BlockStopped(3),
    Finished(Stop.TOOL_USE),
    UsageReported(CanonicalUsage(input_tokens=1, output_tokens=9)),
    Ended(),
]


def test_tool_calls_count_from_zero_and_a_call_without_arguments_gets_an_object() -> None:
    deltas = [c["choices"][0]["delta"] for c in chunks(b"".join(write(TOOL_EVENTS)))[:-2]]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"reasoning_content": "hmm"},
        {"content": "Checking."},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"q":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]},
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "toolu_2",
                    "type": "function",
                    "function": {"name": "now", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]},
    ]


def test_the_openai_sdk_assembles_the_stream() -> None:
    body = b"".join(write(TOOL_EVENTS, Request(model="m", messages=(), include_usage=True)))
    with (
        sdk(body) as client,
        client.chat.completions.stream(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream_options={"include_usage": True},
        ) as stream,
    ):
        completion = stream.get_final_completion()
    choice = completion.choices[0]
    assert completion.id == "chatcmpl-msg_2"
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    assert choice.message.tool_calls is not None
    assert [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [
        ("toolu_1", "get", '{"q":"x"}'),
        ("toolu_2", "now", "{}"),
    ]
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (1, 9)


def test_the_openai_sdk_iterates_raw_chunks_and_assembles_arguments() -> None:
    body = b"".join(write(TOOL_EVENTS))
    arguments: dict[int, str] = {}
    with sdk(body) as client:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        finishes = []
        for part in stream:
            for choice in part.choices:
                finishes.append(choice.finish_reason)
                for fragment in choice.delta.tool_calls or ():
                    function = fragment.function
                    arguments[fragment.index] = arguments.get(fragment.index, "") + (
                        function.arguments or "" if function else ""
                    )
    assert {i: orjson.loads(text) for i, text in arguments.items()} == {0: {"q": "x"}, 1: {}}
    assert [f for f in finishes if f] == ["tool_calls"]


def test_nothing_is_written_after_the_finish_but_usage_and_the_end() -> None:
    late: list[Event] = [
        *TEXT_EVENTS[:5],
        TextDelta(0, "late"),
        Finished(Stop.LENGTH),
        *TEXT_EVENTS[5:],
    ]
    assert write(late) == [*write(TEXT_EVENTS)[:5], b"", b"", *write(TEXT_EVENTS)[5:]]


def test_a_stream_error_becomes_an_error_chunk_then_done_and_the_sdk_raises() -> None:
    events: list[Event] = [
        Started(id="msg_3", model="claude-x"),
        BlockStarted(0, "text"),
        TextDelta(0, "par"),
        StreamError("overloaded", "Overloaded"),
        Ended(),
    ]
    out = write(events)
    assert out[3:] == [
        b'data: {"error":{"message":"Overloaded","type":"server_error","param":null,'
        b'"code":"overloaded"}}\n\ndata: [DONE]\n\n',
        b"",
    ]
    with sdk(b"".join(out)) as client:
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError, match="Overloaded"):
            list(stream)


def test_a_context_error_keeps_its_kind() -> None:
    out = write([StreamError("context", "too long")])
    assert chunks(out[0])[0]["error"]["code"] == "context_too_long"


def test_ended_without_finished_or_started_still_makes_a_whole_stream() -> None:
    parsed = chunks(b"".join(write([Ended()])))
    assert [c.get("choices", [{}])[0].get("finish_reason") for c in parsed] == [None, "stop", None]
    assert parsed[-1] == {"done": 1}


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
