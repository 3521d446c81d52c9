"""OpenAI Responses requests and replies: read into the canonical form and written back, with
every reply checked against the openai SDK's `Response` type."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response, ResponseCreateParams
from pydantic import TypeAdapter

from rungway.protocol.api import Api
from rungway.protocol.openai_responses import check_request
from rungway.translate.canonical import (
    CanonicalUsage,
    Image,
    Message,
    OutputFormat,
    Reasoning,
    Reply,
    Request,
    Stop,
    Text,
    Thinking,
    Tool,
    ToolCall,
    ToolNamed,
    ToolResult,
)
from rungway.translate.names import short_tool_name
from rungway.translate.openai_responses import (
    DROPPED_FIELDS,
    IGNORED_REQUEST_FIELDS,
    OPENAI_RESPONSES,
)
from rungway.translate.openai_responses_stream import ANTHROPIC_REDACTED, ANTHROPIC_SIGNATURE
from tests.unit.translate.recorded import recorded_json

CREATE_PARAMS: TypeAdapter[Any] = TypeAdapter(ResponseCreateParams)
LONG_NAME = "mcp__workspace_server__" + "search_every_document_in_the_shared_drive_" * 2


def read(body: dict[str, Any]) -> Request:
    """Read a client body that the protocol check accepts."""
    assert check_request(body) is None
    return OPENAI_RESPONSES.read_request(body)


def test_a_coding_agent_request_reads_into_turns() -> None:
    request = read(recorded_json(Api.OPENAI_RESPONSES, "codex_request.json"))
    assert request.model == "gpt-5-codex"
    assert request.system == (
        Text("You are a coding agent running in a terminal."),
        Text("<permissions>sandbox: workspace-write</permissions>"),
    )
    assert request.messages == (
        Message(
            "user",
            (Text("<environment_context>\n  <cwd>/home/dev/app</cwd>\n</environment_context>"),),
        ),
        Message("user", (Text("List the files, then read the README."),)),
        Message(
            "assistant",
            (
                Thinking(
                    "**Listing files**", signature="gAAAAABoOpaqueReasoning==", origin="openai"
                ),
                Text("Listing the files first."),
                ToolCall("call_A1", "shell", '{"command":["ls"]}'),
                ToolCall("call_A2", "shell", '{"command":["cat","README.md"]}'),
            ),
        ),
        Message(
            "user",
            (
                ToolResult("call_A1", (Text("README.md\nsrc\n"),)),
                ToolResult("call_A2", (Text("# App\n"),)),
            ),
        ),
        Message(
            "user",
            (Text("What does it do?"), Image(media_type="image/png", data="iVBORw0KGgo=")),
        ),
    )
    assert [tool.name for tool in request.tools] == ["shell", "update_plan"]
    assert request.tools[0].parameters["required"] == ["command"]
    assert request.tool_choice == "auto"
    assert request.parallel_tool_calls is False
    assert request.reasoning == Reasoning(effort="medium")
    assert request.stream is True
    assert request.temperature_max == 2.0
    assert request.dropped == (
        "store",
        "include",
        "prompt_cache_key",
        "input.web_search_call",
        "content.input_image.file_id",
        "tools.web_search",
        "tools.custom",
        "reasoning.summary",
        "text.verbosity",
    )


def test_dropped_fields_are_listed() -> None:
    assert set(IGNORED_REQUEST_FIELDS) < DROPPED_FIELDS
    assert {
        "store",
        "previous_response_id",
        "include",
        "prompt_cache_key",
        "prompt_cache_retention",
        "truncation",
        "metadata",
        "service_tier",
        "background",
        "max_tool_calls",
        "prompt",
        "conversation",
        "top_logprobs",
        "safety_identifier",
        "stream_options",
        "reasoning.summary",
        "text.verbosity",
        "tools.strict",
        "content.input_file",
        "content.input_image.file_id",
        "stop",
        "cache_control",
        "thinking",
        "assistant.image",
    } == DROPPED_FIELDS


def test_every_ignored_field_is_recorded_when_present() -> None:
    body = {"model": "m", "input": "hi"} | dict.fromkeys(IGNORED_REQUEST_FIELDS, "x")
    assert read(body).dropped == IGNORED_REQUEST_FIELDS


def test_a_string_input_is_one_user_turn() -> None:
    request = read({"model": "m", "input": "hello", "instructions": "be brief"})
    assert request.messages == (Message("user", (Text("hello"),)),)
    assert request.system == (Text("be brief"),)
    assert request.stream is False
    assert request.dropped == ()


def test_easy_messages_images_files_and_output_parts() -> None:
    request = read(
        {
            "model": "m",
            "input": [
                {"role": "system", "content": "rules"},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "see"},
                        {"type": "input_image", "image_url": "https://x.test/a.png"},
                        {"type": "input_file", "file_id": "file-1"},
                    ],
                },
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""},
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [
                        {"type": "input_text", "text": "chart:"},
                        {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/"},
                    ],
                },
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
            ],
        }
    )
    assert request.system == (Text("rules"),)
    assert request.messages == (
        Message("user", (Text("see"), Image(url="https://x.test/a.png"))),
        Message("assistant", (ToolCall("c1", "f", "{}"),)),
        Message(
            "user",
            (ToolResult("c1", (Text("chart:"), Image(media_type="image/jpeg", data="/9j/"))),),
        ),
        Message("assistant", (Text("no"),)),
    )
    assert request.dropped == ("content.input_file",)


@pytest.mark.parametrize(
    ("choice", "expected", "dropped"),
    [
        ("auto", "auto", ()),
        ("none", "none", ()),
        ("required", "required", ()),
        ({"type": "function", "name": "f"}, ToolNamed("f"), ()),
        ({"type": "web_search_preview"}, None, ("tool_choice.web_search_preview",)),
        (
            {"type": "allowed_tools", "mode": "auto", "tools": []},
            None,
            ("tool_choice.allowed_tools",),
        ),
    ],
)
def test_tool_choice(choice: object, expected: object, dropped: tuple[str, ...]) -> None:
    request = read({"model": "m", "input": "hi", "tool_choice": choice})
    assert request.tool_choice == expected
    assert request.dropped == dropped


@pytest.mark.parametrize(
    ("effort", "expected"),
    [
        ("minimal", Reasoning(effort="minimal")),
        ("low", Reasoning(effort="low")),
        ("high", Reasoning(effort="high")),
        ("xhigh", Reasoning(effort="high")),
        ("none", None),
        (None, None),
    ],
)
def test_reasoning_effort(effort: str | None, expected: Reasoning | None) -> None:
    assert (
        read({"model": "m", "input": "hi", "reasoning": {"effort": effort}}).reasoning == expected
    )


def test_sampling_and_limits_keep_the_client_scale() -> None:
    request = read(
        {
            "model": "m",
            "input": "hi",
            "temperature": 1.7,
            "top_p": 0.9,
            "max_output_tokens": 4096,
            "user": "u-1",
            "tools": [
                {"type": "function", "name": "f", "strict": True, "parameters": None},
                {"type": "function", "function": {"name": "g", "description": "nested"}},
            ],
        }
    )
    assert (request.temperature, request.temperature_max, request.top_p) == (1.7, 2.0, 0.9)
    assert (request.max_tokens, request.user) == (4096, "u-1")
    assert request.tools == (
        Tool("f", None, {"type": "object", "properties": {}}),
        Tool("g", "nested", {"type": "object", "properties": {}}),
    )
    assert request.dropped == ("tools.strict",)


@pytest.mark.parametrize(
    ("item", "complaint"),
    [
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "call_id"),
        ({"type": "function_call", "call_id": "c", "arguments": "{}"}, "name"),
        ({"type": "function_call_output", "output": "x"}, "call_id"),
        ({"type": "message", "role": "tool", "content": "x"}, "role"),
    ],
)
def test_items_that_cannot_be_read_raise_value_error(item: dict[str, Any], complaint: str) -> None:
    # The gateway's check refuses these first; the reader stands on its own too.
    body = {"model": "m", "input": [item]}
    assert complaint in (check_request(body) or "")
    with pytest.raises(ValueError, match=complaint):
        OPENAI_RESPONSES.read_request(body)


# Bodies come from orjson, which reads integers beyond 64 bits as floats.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
ITEM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            ["message", "function_call", "function_call_output", "reasoning", "item_reference"]
        ),
        "role": st.sampled_from(["user", "assistant", "developer", "system"]),
        "content": JSON,
        "call_id": st.text(max_size=4),
        "name": st.text(max_size=4),
        "arguments": JSON,
        "output": JSON,
        "summary": JSON,
        "encrypted_content": JSON,
    },
)


@given(st.lists(ITEM, max_size=5), JSON, JSON)
def test_a_checked_request_reads_or_raises_value_error(
    items: list[dict[str, Any]], tools: object, choice: object
) -> None:
    body = {"model": "m", "input": items, "tools": tools, "tool_choice": choice}
    if check_request(body) is not None:
        return
    with contextlib.suppress(ValueError):
        OPENAI_RESPONSES.read_request(body)


REQUEST = Request(
    model="client-model",
    system=(Text("Be terse."), Text("Use tools.", cache={"type": "ephemeral"})),
    messages=(
        Message("user", (Text("weather?"), Image(media_type="image/png", data="AAA="))),
        Message(
            "assistant",
            (
                Thinking("signed elsewhere", signature="sig", origin="anthropic"),
                Thinking("openai's", signature="enc==", origin="openai"),
                Text("Checking."),
                ToolCall("toolu_1", LONG_NAME, '{"q":"Paris"}'),
                ToolCall("toolu_2", "get_weather", '{"city":"Paris"}'),
            ),
        ),
        Message(
            "user",
            (
                ToolResult("toolu_1", (Text("found"),)),
                ToolResult(
                    "toolu_2", (Text("rain"), Image(url="https://x.test/r.png")), is_error=True
                ),
                Text("thanks"),
            ),
        ),
    ),
    tools=(
        Tool(LONG_NAME, "search", {"type": "object", "properties": {"q": {"type": "string"}}}),
        Tool("get_weather", None, {"type": "object"}),
    ),
    tool_choice=ToolNamed(LONG_NAME),
    parallel_tool_calls=False,
    max_tokens=1000,
    temperature=1.5,
    temperature_max=2.0,
    top_p=0.5,
    stop=("END",),
    stream=True,
    reasoning=Reasoning(budget_tokens=4000),
    user="u-1",
)


def test_write_request_uses_flat_tools_and_input_items() -> None:
    body = OPENAI_RESPONSES.write_request(REQUEST, model="gpt-5")
    short = short_tool_name(LONG_NAME)
    assert len(short) == 64
    assert body == {
        "model": "gpt-5",
        "instructions": "Be terse.\n\nUse tools.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "weather?"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,AAA=",
                        "detail": "auto",
                    },
                ],
            },
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "openai's"}],
                "encrypted_content": "enc==",
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Checking."}],
            },
            {
                "type": "function_call",
                "call_id": "toolu_1",
                "name": short,
                "arguments": '{"q":"Paris"}',
            },
            {
                "type": "function_call",
                "call_id": "toolu_2",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "toolu_1", "output": "found"},
            {
                "type": "function_call_output",
                "call_id": "toolu_2",
                "output": [
                    {"type": "input_text", "text": "Error: "},
                    {"type": "input_text", "text": "rain"},
                    {"type": "input_image", "image_url": "https://x.test/r.png", "detail": "auto"},
                ],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "thanks"}],
            },
        ],
        "tools": [
            {
                "type": "function",
                "name": short,
                "description": "search",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                "strict": False,
            },
            {
                "type": "function",
                "name": "get_weather",
                "description": None,
                "parameters": {"type": "object"},
                "strict": False,
            },
        ],
        "tool_choice": {"type": "function", "name": short},
        "parallel_tool_calls": False,
        "max_output_tokens": 1000,
        "temperature": 1.5,
        "top_p": 0.5,
        "reasoning": {"effort": "medium"},
        "user": "u-1",
        "stream": True,
        "store": False,
    }
    # Assistant history (its `output_text` messages and reasoning) goes without item ids, as
    # coding agents send it with nothing stored upstream; the SDK's input types describe
    # those items only with an id.
    checked = [
        item
        for item in body["input"]
        if item.get("role") != "assistant" and item["type"] != "reasoning"
    ]
    assert len(checked) == 6
    CREATE_PARAMS.validate_python(body | {"input": checked})


def test_an_error_result_without_images_is_prefixed_text() -> None:
    request = Request(
        model="m",
        messages=(Message("user", (ToolResult("c", (Text("a"), Text("b")), is_error=True),)),),
    )
    (item,) = OPENAI_RESPONSES.write_request(request, model="m")["input"]
    assert item == {"type": "function_call_output", "call_id": "c", "output": "Error: a\nb"}


@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [
        (Reasoning(budget_tokens=1024), "low"),
        (Reasoning(budget_tokens=2048), "low"),
        (Reasoning(budget_tokens=2049), "medium"),
        (Reasoning(budget_tokens=8192), "medium"),
        (Reasoning(budget_tokens=32000), "high"),
        (Reasoning(effort="minimal", budget_tokens=32000), "minimal"),
        (Reasoning(), None),
        (None, None),
    ],
)
def test_thinking_budgets_become_efforts(reasoning: Reasoning | None, effort: str | None) -> None:
    request = Request(model="m", messages=(), reasoning=reasoning)
    body = OPENAI_RESPONSES.write_request(request, model="m")
    assert body.get("reasoning") == ({"effort": effort} if effort else None)
    assert body["store"] is False


def test_read_reply_takes_text_calls_reasoning_and_usage() -> None:
    reply = OPENAI_RESPONSES.read_reply(recorded_json(Api.OPENAI_RESPONSES, "reply.json"), REQUEST)
    assert reply == Reply(
        id="resp_68a1",
        model="gpt-5-2025-08-07",
        parts=(
            Thinking(
                "**Checking the weather**\n\nNeed a tool.",
                signature="gAAAAABoEncrypted==",
                origin="openai",
            ),
            Text("Let me look that up."),
            ToolCall("call_W1", "get_weather", '{"city":"Paris"}'),
        ),
        stop=Stop.TOOL_USE,
        usage=CanonicalUsage(
            input_tokens=176, output_tokens=180, cache_read_tokens=1024, reasoning_tokens=128
        ),
        created=1756000000,
    )


@pytest.mark.parametrize(
    ("status", "details", "stop"),
    [
        ("completed", None, Stop.END),
        ("incomplete", {"reason": "max_output_tokens"}, Stop.LENGTH),
        ("incomplete", {"reason": "content_filter"}, Stop.FILTERED),
    ],
)
def test_read_reply_stop_reasons(status: str, details: dict[str, str] | None, stop: Stop) -> None:
    body = recorded_json(Api.OPENAI_RESPONSES, "reply.json")
    body |= {"status": status, "incomplete_details": details}
    body["output"] = body["output"][:2]
    assert OPENAI_RESPONSES.read_reply(body, REQUEST).stop is stop


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ({"id": "resp_1"}, "`output` array"),
        ({"status": "failed", "output": [], "error": {"message": "boom"}}, "boom"),
    ],
)
def test_unreadable_replies_raise_value_error(body: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        OPENAI_RESPONSES.read_reply(body, REQUEST)


REPLY = Reply(
    id="msg_01",
    model="claude-x",
    parts=(
        Thinking("pondering", signature="sig-abc", origin="anthropic"),
        Thinking("", redacted="opaque-data", origin="anthropic"),
        Text("It is "),
        Text("raining."),
        ToolCall("toolu_9", LONG_NAME, ""),
    ),
    stop=Stop.TOOL_USE,
    usage=CanonicalUsage(
        input_tokens=10,
        output_tokens=20,
        cache_read_tokens=30,
        cache_write_tokens=5,
        reasoning_tokens=7,
    ),
    created=1700000000,
)


def test_write_reply_is_a_valid_sdk_response() -> None:
    body = OPENAI_RESPONSES.write_reply(REPLY, REQUEST)
    response = Response.model_validate(body)
    assert response.id == "resp_msg_01"
    assert response.status == "completed"
    assert response.output_text == "It is raining."
    assert [item.type for item in response.output] == [
        "reasoning",
        "reasoning",
        "message",
        "function_call",
    ]
    assert body["output"][3] == {
        "id": "fc_toolu_9",
        "type": "function_call",
        "status": "completed",
        "call_id": "toolu_9",
        "name": LONG_NAME,
        "arguments": "{}",
    }
    assert body["output"][0]["encrypted_content"] == ANTHROPIC_SIGNATURE + "sig-abc"
    assert body["output"][1]["encrypted_content"] == ANTHROPIC_REDACTED + "opaque-data"
    assert len({item["id"] for item in body["output"]}) == 4
    assert body["usage"] == {
        "input_tokens": 45,
        "input_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 5},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 7},
        "total_tokens": 65,
    }
    assert body["tools"][0] == {
        "type": "function",
        "name": LONG_NAME,
        "description": "search",
        "parameters": REQUEST.tools[0].parameters,
        "strict": False,
    }
    assert body["tool_choice"] == {"type": "function", "name": LONG_NAME}
    assert (body["parallel_tool_calls"], body["temperature"], body["max_output_tokens"]) == (
        False,
        1.5,
        1000,
    )
    assert body["instructions"] == "Be terse.\n\nUse tools."
    assert orjson.loads(orjson.dumps(body)) == body


@pytest.mark.parametrize(
    ("stop", "reason"), [(Stop.LENGTH, "max_output_tokens"), (Stop.FILTERED, "content_filter")]
)
def test_write_reply_incomplete(stop: Stop, reason: str) -> None:
    reply = Reply(id="resp_2", model="m", parts=(Text("cut"),), stop=stop)
    response = Response.model_validate(OPENAI_RESPONSES.write_reply(reply, Request("m", ())))
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == reason
    assert response.tools == []
    assert response.tool_choice == "auto"


def test_signed_thinking_comes_back_to_its_family_next_turn() -> None:
    written = OPENAI_RESPONSES.write_reply(REPLY, REQUEST)
    # The client sends the output items back as the next request's input.
    request = read({"model": "m", "input": written["output"]})
    (turn,) = request.messages
    assert turn.parts[:2] == (
        Thinking("pondering", signature="sig-abc", origin="anthropic"),
        Thinking("", redacted="opaque-data", origin="anthropic"),
    )
    assert turn.parts[-1] == ToolCall("toolu_9", LONG_NAME, "{}")
    # A Responses upstream gets neither of them.
    body = OPENAI_RESPONSES.write_request(request, model="gpt-5")
    assert [item["type"] for item in body["input"]] == ["message", "function_call"]


WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("text", "expected", "dropped"),
    [
        (
            {"format": {"type": "json_schema", "name": "w", "schema": WEATHER, "strict": True}},
            OutputFormat(WEATHER, "w", True),
            (),
        ),
        (
            {"format": {"type": "json_object"}, "verbosity": "low"},
            OutputFormat(),
            ("text.verbosity",),
        ),
        ({"format": {"type": "text"}}, None, ()),
        ({"verbosity": "high"}, None, ("text.verbosity",)),
    ],
)
def test_text_format_reads_as_the_output_format(
    text: dict[str, Any], expected: OutputFormat | None, dropped: tuple[str, ...]
) -> None:
    request = read({"model": "m", "input": "weather?", "text": text})
    assert (request.output_format, request.dropped) == (expected, dropped)


@pytest.mark.parametrize(
    ("output", "written"),
    [
        (
            OutputFormat(WEATHER, "weather", True),
            {"type": "json_schema", "name": "weather", "schema": WEATHER, "strict": True},
        ),
        (OutputFormat(WEATHER), {"type": "json_schema", "name": "output", "schema": WEATHER}),
        (OutputFormat(), {"type": "json_object"}),
    ],
)
def test_the_output_format_is_written_as_text_format(
    output: OutputFormat, written: dict[str, Any]
) -> None:
    request = Request(
        model="m", messages=(Message("user", (Text("weather?"),)),), output_format=output
    )
    body = OPENAI_RESPONSES.write_request(request, model="gpt-5")
    assert body["text"] == {"format": written}
    assert check_request(body) is None
    assert CREATE_PARAMS.validate_python(body)["text"] == {"format": written}
    # Read back, a schema has the name it was sent under.
    sent = output if output.schema is None else dataclasses.replace(output, name=written["name"])
    assert OPENAI_RESPONSES.read_request(body).output_format == sent
