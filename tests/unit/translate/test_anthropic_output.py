"""Structured output to Anthropic: `output_config.format` where the model has it, a forced
tool where it does not, and that tool's call read back as the reply's text."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import openai
import orjson
import pytest
from pydantic import TypeAdapter

from rungway.protocol.sse import SseSplitter
from rungway.translate.anthropic import ANTHROPIC
from rungway.translate.anthropic_output import OUTPUT_TOOL
from rungway.translate.canonical import (
    BlockStarted,
    BlockStopped,
    Finished,
    Message,
    OutputFormat,
    Reasoning,
    Request,
    Stop,
    Text,
    TextDelta,
    Tool,
    ToolCall,
    ToolNamed,
)
from rungway.translate.openai_chat import OPENAI_CHAT
from tests.unit.translate.test_anthropic_codec import sdk_round_trip

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
LOOKUP = Tool("lookup", None, {"type": "object", "properties": {"q": {"type": "string"}}})
ANSWER = '{"city":"Oslo","celsius":4}'
NATIVE = "claude-sonnet-4-5"
OLDER = "claude-sonnet-4-20250514"
CONFIG: TypeAdapter[Any] = TypeAdapter(anthropic.types.OutputConfigParam)
TOOL: TypeAdapter[Any] = TypeAdapter(anthropic.types.ToolParam)
CHOICE: TypeAdapter[Any] = TypeAdapter(anthropic.types.ToolChoiceParam)


def structured(output: OutputFormat, **fields: Any) -> Request:
    """A Chat client's request for structured output."""
    return Request(
        model="gpt-4.1",
        messages=(Message("user", (Text("Weather in Oslo?"),)),),
        temperature_max=2.0,
        output_format=output,
        **fields,
    )


def reply(*content: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": NATIVE,
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 9, "output_tokens": 7},
    }


def test_a_schema_goes_as_the_output_format_to_a_model_that_has_one() -> None:
    body = ANTHROPIC.write_request(structured(OutputFormat(WEATHER, "weather", True)), model=NATIVE)
    assert body == {
        "model": NATIVE,
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]}],
        "output_config": {"format": {"type": "json_schema", "schema": WEATHER}},
    }
    assert CONFIG.validate_python(body["output_config"]) == body["output_config"]
    assert sdk_round_trip(body, reply({"type": "text", "text": ANSWER})) == body


def test_the_output_format_sits_beside_the_effort_of_adaptive_thinking() -> None:
    request = structured(OutputFormat(WEATHER), reasoning=Reasoning(effort="low"))
    body = ANTHROPIC.write_request(request, model="claude-opus-4-7")
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": WEATHER},
    }
    assert body["thinking"] == {"type": "adaptive"}


def test_an_anthropic_clients_output_format_reads_back() -> None:
    body = ANTHROPIC.write_request(structured(OutputFormat(WEATHER)), model=NATIVE)
    assert ANTHROPIC.read_request(body).output_format == OutputFormat(WEATHER)


@pytest.mark.parametrize(
    ("output", "model"),
    [
        (OutputFormat(WEATHER), OLDER),  # no output format before Claude 4.5
        (OutputFormat(WEATHER), "claude-3-5-haiku-latest"),
        (OutputFormat(), NATIVE),  # Anthropic has no bare JSON mode
    ],
)
def test_without_an_output_format_a_forced_tool_stands_in(output: OutputFormat, model: str) -> None:
    request = structured(output, reasoning=Reasoning(budget_tokens=4096))
    body = ANTHROPIC.write_request(request, model=model)
    schema = output.schema or {"type": "object"}
    assert body["tools"] == [
        {
            "name": OUTPUT_TOOL,
            "description": (
                "Give your answer as this tool's input: it is the JSON the user asked for."
            ),
            "input_schema": schema,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": OUTPUT_TOOL}
    # Anthropic takes no thinking with a forced tool.
    assert "thinking" not in body
    assert "output_config" not in body
    TOOL.validate_python(body["tools"][0])
    CHOICE.validate_python(body["tool_choice"])
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": OUTPUT_TOOL, "input": {}}
    assert sdk_round_trip(body, reply(tool_use, stop="tool_use")) == body


@pytest.mark.parametrize(
    ("choice", "written"),
    [
        (None, {"type": "any"}),
        ("auto", {"type": "any"}),
        ("required", {"type": "any"}),
        ("none", {"type": "tool", "name": OUTPUT_TOOL}),
        (ToolNamed("lookup"), {"type": "tool", "name": "lookup"}),
    ],
)
def test_beside_the_clients_tools_the_model_must_call_one_of_them_or_answer(
    choice: Any, written: dict[str, Any]
) -> None:
    request = structured(OutputFormat(WEATHER), tools=(LOOKUP,), tool_choice=choice)
    body = ANTHROPIC.write_request(request, model=OLDER)
    assert [tool["name"] for tool in body["tools"]] == ["lookup", OUTPUT_TOOL]
    assert body["tool_choice"] == written


def test_a_serial_tool_choice_stays_serial_when_forced() -> None:
    request = structured(OutputFormat(), tools=(LOOKUP,), parallel_tool_calls=False)
    body = ANTHROPIC.write_request(request, model=NATIVE)
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


def test_the_output_tools_call_is_the_replys_text() -> None:
    request = structured(OutputFormat(WEATHER))
    upstream = reply(
        {"type": "tool_use", "id": "toolu_1", "name": OUTPUT_TOOL, "input": orjson.loads(ANSWER)},
        stop="tool_use",
    )
    read = ANTHROPIC.read_reply(upstream, request)
    assert (read.parts, read.stop) == ((Text(ANSWER),), Stop.END)
    chat = OPENAI_CHAT.write_reply(read, request)
    assert chat["choices"][0]["message"]["content"] == ANSWER
    assert chat["choices"][0]["finish_reason"] == "stop"


def test_a_call_of_the_clients_own_tool_stays_a_call() -> None:
    request = structured(OutputFormat(WEATHER), tools=(LOOKUP,))
    upstream = reply(
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "oslo"}},
        stop="tool_use",
    )
    read = ANTHROPIC.read_reply(upstream, request)
    assert (read.parts, read.stop) == (
        (ToolCall("toolu_1", "lookup", '{"q":"oslo"}'),),
        Stop.TOOL_USE,
    )


def test_without_structured_output_a_tool_of_that_name_is_a_call() -> None:
    request = Request(model="m", messages=(Message("user", (Text("x"),)),))
    upstream = reply(
        {"type": "tool_use", "id": "t", "name": OUTPUT_TOOL, "input": {}}, stop="tool_use"
    )
    assert ANTHROPIC.read_reply(upstream, request).stop is Stop.TOOL_USE


def frame(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def emulated_stream() -> bytes:
    """An Anthropic upstream answering through the output tool, its arguments in two pieces."""
    start = {"type": "tool_use", "id": "toolu_1", "name": OUTPUT_TOOL, "input": {}}
    return b"".join(
        [
            frame("message_start", {"type": "message_start", "message": reply()}),
            frame(
                "content_block_start",
                {"index": 0, "content_block": start, "type": "content_block_start"},
            ),
            *(
                frame(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
                for piece in ('{"city":', '"Oslo","celsius":4}')
            ),
            frame("content_block_stop", {"type": "content_block_stop", "index": 0}),
            frame(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 7},
                },
            ),
            frame("message_stop", {"type": "message_stop"}),
        ]
    )


def test_the_output_tools_streamed_arguments_stream_as_text() -> None:
    reader = ANTHROPIC.stream_reader(structured(OutputFormat(WEATHER)))
    events = [event for sse in SseSplitter().feed(emulated_stream()) for event in reader.read(sse)]
    kept = [e for e in events if isinstance(e, BlockStarted | TextDelta | BlockStopped | Finished)]
    assert kept == [
        BlockStarted(0, "text"),
        TextDelta(0, '{"city":'),
        TextDelta(0, '"Oslo","celsius":4}'),
        BlockStopped(0),
        Finished(Stop.END),
    ]


def test_a_chat_client_streams_the_answer_as_content_the_openai_sdk_reads() -> None:
    request = structured(OutputFormat(WEATHER))
    reader = ANTHROPIC.stream_reader(request)
    writer = OPENAI_CHAT.stream_writer(request)
    body = b"".join(
        writer.write(event)
        for sse in SseSplitter().feed(emulated_stream())
        for event in reader.read(sse)
    )
    transport = httpx2.MockTransport(
        lambda _: httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})
    )
    client = openai.OpenAI(
        base_url="http://gateway.test/v1",
        api_key="k",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )
    chunks = list(client.chat.completions.create(model="gpt-4.1", messages=[], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    tool_calls = [c for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert (text, finishes, tool_calls) == (ANSWER, ["stop"], [])
