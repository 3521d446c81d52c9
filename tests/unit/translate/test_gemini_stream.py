"""The Gemini stream reader and writer, against golden streams and google-genai's types."""

from __future__ import annotations

import pathlib

import orjson
import pytest
from google.genai import types

from rungway.protocol.api import Api
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
    UsageReported,
)
from rungway.translate.gemini import GEMINI
from tests.unit.translate.recorded import UPSTREAM_STREAM, recorded

FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures" / "gemini"
REQUEST = Request(model="gemini-2.5-flash", messages=(Message("user", (Text("hi"),)),))


def read(raw: bytes) -> list[Event]:
    reader = GEMINI.stream_reader(REQUEST)
    return [event for sse in SseSplitter().feed(raw) for event in reader.read(sse)]


def test_a_stream_of_thoughts_text_and_calls_reads_as_canonical_events() -> None:
    # The recording the shared stream suite also writes again and reads back.
    assert read(recorded(Api.GEMINI, UPSTREAM_STREAM)) == [
        Started("stream-1", "gemini-2.5-flash"),
        BlockStarted(0, "thinking"),
        ThinkingDelta(0, "**Planning**\nTwo cities to look up."),
        BlockStopped(0),
        BlockStarted(1, "text"),
        TextDelta(1, "Let me "),
        TextDelta(1, "check."),
        BlockStopped(1),
        BlockStarted(2, "tool_call", "call_stream-1_0", "get_weather"),
        ArgumentsDelta(2, '{"city":"Paris"}'),
        BlockStopped(2),
        BlockStarted(3, "tool_call", "call_stream-1_1", "get_weather"),
        ArgumentsDelta(3, '{"city":"Lyon"}'),
        BlockStopped(3),
        Finished(Stop.TOOL_USE),
        # 50 prompt tokens, 20 of them cached; 30 thought tokens beside 25 candidates.
        UsageReported(
            CanonicalUsage(
                input_tokens=30, output_tokens=55, cache_read_tokens=20, reasoning_tokens=30
            )
        ),
        Ended(),
    ]


def test_a_stream_cut_by_a_safety_filter_ends_filtered() -> None:
    events = read((FIXTURES / "stream_safety.sse").read_bytes())
    assert events[-3:] == [
        Finished(Stop.FILTERED),
        UsageReported(CanonicalUsage(input_tokens=7, output_tokens=2)),
        Ended(),
    ]
    assert TextDelta(0, "Once upon") in events


def test_an_error_inside_a_stream_reads_as_a_stream_error() -> None:
    assert read((FIXTURES / "stream_error.sse").read_bytes()) == [
        Started("stream-3", "gemini-2.5-flash"),
        BlockStarted(0, "text"),
        TextDelta(0, "Hel"),
        StreamError("overloaded", "The model is overloaded. Please try again later."),
    ]


def test_a_blocked_prompt_in_a_stream_ends_filtered() -> None:
    chunk = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4},
        "responseId": "b-1",
    }
    types.GenerateContentResponse.model_validate_json(orjson.dumps(chunk))
    reader = GEMINI.stream_reader(REQUEST)
    raw = b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"
    events = [event for sse in SseSplitter().feed(raw) for event in reader.read(sse)]
    assert events == [
        Started("b-1", "gemini-2.5-flash"),
        Finished(Stop.FILTERED),
        UsageReported(CanonicalUsage(input_tokens=4)),
        Ended(),
    ]


# What an Anthropic upstream's stream reads as, to be written for a Gemini client.
UPSTREAM: list[Event] = [
    Started("msg_1", "claude-sonnet-4-5", CanonicalUsage(input_tokens=20)),
    BlockStarted(0, "thinking"),
    ThinkingDelta(0, "Two cities."),
    ThinkingDelta(0, signature="sig-a"),
    BlockStopped(0),
    BlockStarted(1, "text"),
    TextDelta(1, "Checking."),
    BlockStopped(1),
    BlockStarted(2, "tool_call", "toolu_1", "get_weather"),
    ArgumentsDelta(2, '{"city":'),
    ArgumentsDelta(2, '"Paris"}'),
    BlockStopped(2),
    Finished(Stop.TOOL_USE),
    UsageReported(CanonicalUsage(input_tokens=20, output_tokens=15, cache_read_tokens=5)),
    Ended(),
]


def written(events: list[Event]) -> list[bytes]:
    writer = GEMINI.stream_writer(REQUEST)
    return [writer.write(event) for event in events]


def chunks(outputs: list[bytes]) -> list[dict[str, object]]:
    raw = b"".join(outputs)
    return [orjson.loads(event.data) for event in SseSplitter().feed(raw)]


def test_a_stream_writes_one_gemini_chunk_per_piece_and_the_finish_last() -> None:
    outputs = written(UPSTREAM)
    assert all(output.endswith(b"\r\n\r\n") for output in outputs if output)
    # Nothing for the start, the signature, block edges or the argument pieces.
    assert [bool(output) for output in outputs] == [
        False, False, True, False, False, False, True, False,
        False, False, False, True, False, False, True,
    ]  # fmt: skip
    every = chunks(outputs)
    for chunk in every:
        types.GenerateContentResponse.model_validate_json(orjson.dumps(chunk))
    head = {"modelVersion": "claude-sonnet-4-5", "responseId": "msg_1"}

    def candidate(*parts: dict[str, object]) -> dict[str, object]:
        return {"content": {"role": "model", "parts": list(parts)}, "index": 0}

    assert every == [
        {"candidates": [candidate({"text": "Two cities.", "thought": True})], **head},
        {"candidates": [candidate({"text": "Checking."})], **head},
        {
            "candidates": [
                candidate(
                    {
                        "functionCall": {
                            "name": "get_weather",
                            "args": {"city": "Paris"},
                            "id": "toolu_1",
                        }
                    }
                )
            ],
            **head,
        },
        {
            "candidates": [{**candidate({"text": ""}), "finishReason": "STOP"}],
            "usageMetadata": {
                "promptTokenCount": 25,
                "candidatesTokenCount": 15,
                "totalTokenCount": 40,
                "cachedContentTokenCount": 5,
            },
            **head,
        },
    ]


def test_the_written_stream_reads_back_through_the_sdk_as_one_reply() -> None:
    every = [
        types.GenerateContentResponse.model_validate_json(orjson.dumps(chunk))
        for chunk in chunks(written(UPSTREAM))
    ]
    assert "".join(chunk.text or "" for chunk in every) == "Checking."
    calls = [call for chunk in every for call in chunk.function_calls or ()]
    assert [(call.name, call.args, call.id) for call in calls] == [
        ("get_weather", {"city": "Paris"}, "toolu_1")
    ]
    last = every[-1]
    assert last.candidates is not None
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata is not None
    assert last.usage_metadata.prompt_token_count == 25


@pytest.mark.parametrize(
    ("kind", "code", "status"),
    [
        ("overloaded", 503, "UNAVAILABLE"),
        ("rate_limited", 429, "RESOURCE_EXHAUSTED"),
        ("bad_request", 400, "INVALID_ARGUMENT"),
        ("context", 400, "INVALID_ARGUMENT"),
        ("auth", 401, "UNAUTHENTICATED"),
        ("billing", 400, "FAILED_PRECONDITION"),
        ("server", 500, "INTERNAL"),
    ],
)
def test_a_stream_error_writes_as_google_error_event(kind: str, code: int, status: str) -> None:
    (output,) = written([StreamError(kind, "went away")])  # type: ignore[arg-type]
    assert (
        output
        == b"data: "
        + orjson.dumps({"error": {"code": code, "message": "went away", "status": status}})
        + b"\r\n\r\n"
    )
