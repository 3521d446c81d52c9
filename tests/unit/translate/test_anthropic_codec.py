"""The Anthropic codec reads and writes Messages requests and replies faithfully."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from pydantic import BaseModel, TypeAdapter

from rungway.translate.anthropic import ANTHROPIC, DROPPED_FIELDS
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
    ToolChoice,
    ToolNamed,
    ToolResult,
)

LONG_NAME = "mcp__filesystem__" + "read_text_file_with_a_very_long_descriptive_name_" * 2
assert 64 < len(LONG_NAME) <= 128
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
PNG = "iVBORw0KGgoAAAANSUhEUg=="
CACHE = {"type": "ephemeral"}


def assert_exact(model: BaseModel) -> None:
    """Fail when the SDK model (or one inside it) holds a field its type does not declare."""
    assert not model.model_extra, f"{type(model).__name__} has unknown fields {model.model_extra}"
    for value in vars(model).values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                assert_exact(item)


def valid_message(body: dict[str, Any]) -> anthropic.types.Message:
    message = anthropic.types.Message.model_validate(body)
    assert_exact(message)
    return message


def sdk_round_trip(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """Send `body` through the SDK's own `messages.create` and return what went on the wire.

    The SDK takes each top-level field as a keyword argument, so a field it does not know
    fails here. Its current API version has no sampling fields; the 2023-06-01 version the
    gateway sends still takes them, so they ride in `extra_body`.
    """
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(orjson.loads(request.content))
        return httpx2.Response(200, json=reply)

    client = anthropic.Anthropic(
        api_key="k",
        base_url="http://upstream.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    sampling = {"temperature", "top_p"}
    params = {key: value for key, value in body.items() if key not in {"stream", *sampling}}
    extra = {key: value for key, value in body.items() if key in sampling}
    message = client.messages.create(**params, extra_body=extra, timeout=30)
    valid_message(message.model_dump(mode="json", exclude_unset=True))
    return sent[0]


# Requests from Anthropic clients


CLAUDE_CODE_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5-20250929",
    "max_tokens": 32000,
    "system": [
        {"type": "text", "text": "You are a coding agent."},
        {"type": "text", "text": "Project rules.", "cache_control": CACHE},
    ],
    "messages": [
        {"role": "user", "content": "Read the notes."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should read it.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Reading."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": LONG_NAME,
                    "input": {"path": "notes.md"},
                },
                {"type": "tool_use", "id": "toolu_02", "name": "Glob", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "hello"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_02",
                    "content": [
                        {"type": "text", "text": "a.png"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                    ],
                    "is_error": True,
                },
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                {"type": "text", "text": "Now summarise.", "cache_control": CACHE},
            ],
        },
    ],
    "tools": [
        {"name": LONG_NAME, "description": "Read a file.", "input_schema": SCHEMA},
        {"name": "Glob", "input_schema": {"type": "object", "properties": {}}},
    ],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "thinking": {"type": "enabled", "budget_tokens": 10000},
    "temperature": 1,
    "top_p": 0.99,
    "stop_sequences": ["END"],
    "stream": True,
    "metadata": {"user_id": "user-7"},
}

CLAUDE_CODE_CANONICAL = Request(
    model="claude-sonnet-4-5-20250929",
    system=(Text("You are a coding agent."), Text("Project rules.", CACHE)),
    messages=(
        Message("user", (Text("Read the notes."),)),
        Message(
            "assistant",
            (
                Thinking("I should read it.", signature="sig-1", origin="anthropic"),
                Thinking("", redacted="opaque", origin="anthropic"),
                Text("Reading."),
                ToolCall("toolu_01", LONG_NAME, '{"path":"notes.md"}'),
                ToolCall("toolu_02", "Glob", "{}"),
            ),
        ),
        Message(
            "user",
            (
                ToolResult("toolu_01", (Text("hello"),)),
                ToolResult("toolu_02", (Text("a.png"), Image("image/png", PNG)), is_error=True),
                Image(url="https://x.test/a.png"),
                Text("Now summarise.", CACHE),
            ),
        ),
    ),
    tools=(
        Tool(LONG_NAME, "Read a file.", SCHEMA),
        Tool("Glob", None, {"type": "object", "properties": {}}),
    ),
    tool_choice="auto",
    parallel_tool_calls=False,
    max_tokens=32000,
    temperature=1,
    temperature_max=1.0,
    top_p=0.99,
    stop=("END",),
    stream=True,
    reasoning=Reasoning(budget_tokens=10000),
    user="user-7",
)


def test_a_claude_code_request_reads_into_the_canonical_form() -> None:
    assert ANTHROPIC.read_request(CLAUDE_CODE_REQUEST) == CLAUDE_CODE_CANONICAL


def test_a_request_round_trips_with_tool_ids_names_and_order() -> None:
    canonical = ANTHROPIC.read_request(CLAUDE_CODE_REQUEST)
    written = ANTHROPIC.write_request(canonical, model="claude-sonnet-4-5-20250929")
    # Everything comes back as sent, except that string content is written as text blocks.
    expected = copy.deepcopy(CLAUDE_CODE_REQUEST)
    expected["messages"][0]["content"] = [{"type": "text", "text": "Read the notes."}]
    expected["messages"][2]["content"][0]["content"] = [{"type": "text", "text": "hello"}]
    assert written == expected
    reply: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    assert sdk_round_trip(written, reply) == {k: v for k, v in written.items() if k != "stream"}


def test_fields_the_canonical_form_cannot_carry_are_named_in_dropped() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 10,
        "top_k": 5,
        "service_tier": "auto",
        "container": "c-1",
        "mcp_servers": [],
        "metadata": {"user_id": "u", "trace": "t"},
        "output_config": {"format": {"type": "json_schema", "schema": {}}},
        "system": [{"type": "text", "text": "s"}, {"type": "image", "source": {}}],
        "tools": [
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"name": "t", "input_schema": SCHEMA, "cache_control": CACHE, "strict": True},
        ],
        "tool_choice": {"type": "something_new"},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": {"type": "text", "data": "pdf"}},
                    {"type": "image", "source": {"type": "file", "file_id": "f"}},
                    {"type": "text", "text": "x", "citations": [{"type": "char_location"}]},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "search_result", "source": "s"}],
                        "cache_control": CACHE,
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "server_tool_use", "id": "s", "name": "web_search"}],
            },
        ],
    }
    request = ANTHROPIC.read_request(body)
    assert request.dropped == (
        "top_k",
        "service_tier",
        "container",
        "mcp_servers",
        "system.non_text",
        "messages.document",
        "messages.image.file",
        "messages.citations",
        "messages.cache_control",
        "messages.tool_result.search_result",
        "messages.server_tool_use",
        "tool_choice",
        "metadata.trace",
        "tools.web_search_20250305",
        "tools.strict",
        "tools.cache_control",
    )
    assert [message.role for message in request.messages] == ["user"]
    assert request.tools == (Tool("t", None, SCHEMA),)
    assert request.output_format == OutputFormat(schema={})


def test_every_field_the_writers_leave_out_is_listed() -> None:
    assert sorted(DROPPED_FIELDS) == [
        "created",
        "include_usage",
        "reasoning.after_unsigned_tool_turn",
        "reasoning.budget_tokens.newer_models",
        "reasoning.with_forced_tool",
        "reasoning_tokens",
        "redacted_thinking.stream",
        "stop.whitespace",
        "temperature.newer_models",
        "temperature.with_thinking",
        "text.whitespace",
        "thinking.signature",
        "thinking.unsigned",
        "top_p.newer_models",
        "top_p.with_thinking",
    ]


def test_a_thinking_block_with_an_empty_signature_is_not_signed() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "t", "signature": ""}],
            },
        ],
    }
    (_, answer) = ANTHROPIC.read_request(body).messages
    assert answer.parts == (Thinking("t", signature=None, origin=None),)
    written = ANTHROPIC.write_request(ANTHROPIC.read_request(body), model="m")
    assert written["messages"] == [{"role": "user", "content": [{"type": "text", "text": "q"}]}]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, ("auto", None)),
        ({"type": "any"}, ("required", None)),
        ({"type": "none"}, ("none", None)),
        ({"type": "tool", "name": "Glob"}, (ToolNamed("Glob"), None)),
        ({"type": "any", "disable_parallel_tool_use": True}, ("required", False)),
    ],
)
def test_tool_choice_reads(choice: dict[str, Any], expected: tuple[object, bool | None]) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [], "tool_choice": choice}
    request = ANTHROPIC.read_request(body)
    assert (request.tool_choice, request.parallel_tool_calls) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, Reasoning(budget_tokens=2048)),
        ({"thinking": {"type": "disabled"}}, None),
        ({"thinking": {"type": "adaptive"}}, Reasoning(effort="high")),
        (
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}},
            Reasoning(effort="low"),
        ),
        (
            {
                "thinking": {"type": "adaptive", "display": "omitted"},
                "output_config": {"effort": "xhigh"},
            },
            Reasoning(effort="high"),
        ),
        ({}, None),
    ],
)
def test_thinking_reads_as_reasoning(fields: dict[str, Any], expected: Reasoning | None) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [], **fields}
    assert ANTHROPIC.read_request(body).reasoning == expected


def test_a_mid_conversation_system_turn_joins_the_system_text() -> None:
    body = {
        "model": "m",
        "max_tokens": 5,
        "system": "first",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "system", "content": "second"},
        ],
    }
    request = ANTHROPIC.read_request(body)
    assert request.system == (Text("first"), Text("second"))
    assert request.messages == (Message("user", (Text("q"),)),)


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([{"role": "tool", "content": "x"}], "messages.0.role"),
        ([{"role": "user", "content": 5}], "messages.0.content"),
        ([{"role": "user", "content": ["text"]}], "messages.0.content.0"),
        ([{"role": "user", "content": [{"type": "text"}]}], "messages.0.content.0.text"),
        ([{"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}], "tool_use"),
        ([{"role": "user", "content": [{"type": "tool_result"}]}], "tool_use_id"),
    ],
)
def test_a_request_the_reader_cannot_understand_says_what_is_wrong(
    messages: list[Any], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        ANTHROPIC.read_request({"model": "m", "max_tokens": 5, "messages": messages})


# Requests to an Anthropic upstream from clients of other APIs


def chat_request(**fields: Any) -> Request:
    """A canonical request as an OpenAI Chat client's reader would make it."""
    defaults: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": (Message("user", (Text("hi"),)),),
        "temperature_max": 2.0,
    }
    return Request(**{**defaults, **fields})


def test_a_chat_conversation_is_written_as_anthropic_requires() -> None:
    request = chat_request(
        system=(Text("Be brief."), Text(" \n"), Text("Use tools.")),
        messages=(
            Message("user", (Text("Look at this"),)),
            Message("user", (Image(url="data:image/jpg;base64," + PNG),)),
            Message(
                "assistant",
                (
                    Thinking("reasoned elsewhere", origin="openai"),
                    Text(""),
                    Text("\n\n"),
                    ToolCall("call_a", LONG_NAME, '{"path":"a"}'),
                    ToolCall("functions.Glob:1", "Glob", ""),
                    ToolCall("call_c", "Glob", "not json"),
                ),
            ),
            # Results arrive one message each, in another order, with user text between.
            Message("user", (ToolResult("call_c", (Text("c"),)),)),
            Message("user", (Text("and also"),)),
            Message("user", (ToolResult("call_a", (Text("a"), Image(url="https://x.test/i"))),)),
            Message("user", (ToolResult("functions.Glob:1", (), is_error=True),)),
        ),
        tools=(Tool(LONG_NAME, "Read.", SCHEMA), Tool("Glob", "", {})),
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=1.6,
        top_p=0.5,
        stop=("\n\n", "STOP"),
        user="u-1",
    )
    written = ANTHROPIC.write_request(request, model="claude-sonnet-4-5")
    assert written == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look at this"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_a", "name": LONG_NAME, "input": {"path": "a"}},
                    {"type": "tool_use", "id": "functions_Glob_1", "name": "Glob", "input": {}},
                    {"type": "tool_use", "id": "call_c", "name": "Glob", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_a",
                        "content": [
                            {"type": "text", "text": "a"},
                            {"type": "image", "source": {"type": "url", "url": "https://x.test/i"}},
                        ],
                    },
                    {"type": "tool_result", "tool_use_id": "functions_Glob_1", "is_error": True},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_c",
                        "content": [{"type": "text", "text": "c"}],
                    },
                    {"type": "text", "text": "and also"},
                ],
            },
        ],
        "temperature": 1.0,
        "top_p": 0.5,
        "stop_sequences": ["STOP"],
        "tools": [
            {"name": LONG_NAME, "input_schema": SCHEMA, "description": "Read."},
            {"name": "Glob", "input_schema": {"type": "object", "properties": {}}},
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "metadata": {"user_id": "u-1"},
    }
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    assert sdk_round_trip(written, reply) == written
    for message in written["messages"]:
        for block in message["content"]:
            TypeAdapter(anthropic.types.ContentBlockParam).validate_python(block)


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ("none", False, {"type": "none"}),
        (ToolNamed("Glob"), None, {"type": "tool", "name": "Glob"}),
        (
            ToolNamed("Glob"),
            False,
            {"type": "tool", "name": "Glob", "disable_parallel_tool_use": True},
        ),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (None, None, None),
    ],
)
def test_tool_choice_writes(
    choice: ToolChoice | None, parallel: bool | None, expected: dict[str, Any] | None
) -> None:
    request = chat_request(
        tools=(Tool("Glob", None, SCHEMA),), tool_choice=choice, parallel_tool_calls=parallel
    )
    assert ANTHROPIC.write_request(request, model="c").get("tool_choice") == expected


@pytest.mark.parametrize(
    ("reasoning", "max_tokens", "thinking", "written_max"),
    [
        (Reasoning(effort="minimal"), None, 1024, 8192),
        (Reasoning(effort="low"), 4000, 2048, 4000),
        (Reasoning(effort="medium"), None, 8192, 9216),
        (Reasoning(effort="high"), 4096, 24576, 25600),
        (Reasoning(budget_tokens=500), 2000, 1024, 2000),
        (Reasoning(effort="low", budget_tokens=3000), None, 3000, 8192),
        (Reasoning(budget_tokens=0), 100, None, 100),
        (None, None, None, 8192),
    ],
)
def test_reasoning_becomes_a_thinking_budget_below_max_tokens(
    reasoning: Reasoning | None, max_tokens: int | None, thinking: int | None, written_max: int
) -> None:
    request = chat_request(reasoning=reasoning, max_tokens=max_tokens, temperature=0.2)
    written = ANTHROPIC.write_request(request, model="c")
    assert written["max_tokens"] == written_max
    if thinking is None:
        assert "thinking" not in written
        assert written["temperature"] == 0.2
    else:
        assert written["thinking"] == {"type": "enabled", "budget_tokens": thinking}
        assert thinking < written["max_tokens"]
        assert "temperature" not in written  # Anthropic accepts only 1 with thinking


@pytest.mark.parametrize(
    ("model", "reasoning", "effort"),
    [
        ("claude-opus-4-7", Reasoning(effort="minimal"), "low"),
        ("claude-opus-4-8-20260601", Reasoning(effort="high"), "high"),
        ("claude-fable-5", Reasoning(budget_tokens=4000), "medium"),
        ("us.anthropic.claude-sonnet-5-v1:0", Reasoning(budget_tokens=30000), "high"),
        ("claude-haiku-5-5", Reasoning(effort="low", budget_tokens=9000), "low"),
    ],
)
def test_newer_claude_models_get_adaptive_thinking_and_no_sampling(
    model: str, reasoning: Reasoning, effort: str
) -> None:
    request = chat_request(reasoning=reasoning, temperature=0.3, top_p=0.9, max_tokens=1000)
    written = ANTHROPIC.write_request(request, model=model)
    assert written["thinking"] == {"type": "adaptive"}
    assert written["output_config"] == {"effort": effort}
    assert written["max_tokens"] == 1000  # adaptive thinking has no budget to stay above
    assert "temperature" not in written
    assert "top_p" not in written


@pytest.mark.parametrize(
    "model",
    ["claude-sonnet-4-5-20250929", "claude-opus-4-20250514", "claude-3-5-sonnet-20241022", "glm-5"],
)
def test_older_and_other_models_keep_budgets_and_sampling(model: str) -> None:
    request = chat_request(reasoning=Reasoning(effort="low"), top_p=0.97, temperature=1.0)
    written = ANTHROPIC.write_request(request, model=model)
    assert written["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert (written["temperature"], written["top_p"]) == (1.0, 0.97)
    plain = ANTHROPIC.write_request(chat_request(temperature=0.4, top_p=0.5), model=model)
    assert (plain["temperature"], plain["top_p"]) == (0.4, 0.5)


def test_thinking_is_not_enabled_where_anthropic_would_reject_it() -> None:
    forced = chat_request(
        reasoning=Reasoning(effort="low"), tools=(Tool("t", None, SCHEMA),), tool_choice="t"
    )
    assert "thinking" not in ANTHROPIC.write_request(forced, model="c")
    # The last tool turn came from a reply whose thinking the client could not keep.
    unsigned_turn = chat_request(
        reasoning=Reasoning(effort="low"),
        tools=(Tool("t", None, SCHEMA),),
        messages=(
            Message("user", (Text("go"),)),
            Message("assistant", (ToolCall("call_1", "t", "{}"),)),
            Message("user", (ToolResult("call_1", (Text("done"),)),)),
        ),
    )
    assert "thinking" not in ANTHROPIC.write_request(unsigned_turn, model="c")
    signed_turn = chat_request(
        reasoning=Reasoning(effort="low"),
        tools=(Tool("t", None, SCHEMA),),
        messages=(
            Message("user", (Text("go"),)),
            Message(
                "assistant",
                (Thinking("t", signature="s", origin="anthropic"), ToolCall("call_1", "t", "{}")),
            ),
            Message("user", (ToolResult("call_1", (Text("done"),)),)),
        ),
    )
    written = ANTHROPIC.write_request(signed_turn, model="c")
    assert written["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert written["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "t",
        "signature": "s",
    }


def test_signed_thinking_is_written_only_for_its_own_provider() -> None:
    parts = (
        Thinking("a", signature="sig", origin="anthropic"),
        Thinking("", redacted="opaque", origin="anthropic"),
        Thinking("b", signature="foreign", origin="openai"),
        Thinking("c"),
        Text("answer"),
    )
    request = chat_request(messages=(Message("user", (Text("q"),)), Message("assistant", parts)))
    assert ANTHROPIC.write_request(request, model="c")["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "a", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "answer"},
    ]


@pytest.mark.parametrize(
    ("image", "source"),
    [
        (
            Image(url="data:image/png;base64," + PNG),
            {"type": "base64", "media_type": "image/png", "data": PNG},
        ),
        (Image(data=PNG), {"type": "base64", "media_type": "image/png", "data": PNG}),
        (
            Image(data="/9j/4AAQ"),
            {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"},
        ),
        (
            Image(url="data:image/svg+xml,%3Csvg%2F%3E"),
            {"type": "base64", "media_type": "image/svg+xml", "data": "PHN2Zy8+"},
        ),
        (Image(url="https://x.test/a.gif"), {"type": "url", "url": "https://x.test/a.gif"}),
    ],
)
def test_images_are_written_as_base64_or_url_sources(image: Image, source: dict[str, str]) -> None:
    request = chat_request(messages=(Message("user", (image,)),))
    (block,) = ANTHROPIC.write_request(request, model="c")["messages"][0]["content"]
    assert block == {"type": "image", "source": source}


def test_a_malformed_data_url_is_refused() -> None:
    request = chat_request(messages=(Message("user", (Image(url="data:image/png;base64"),)),))
    with pytest.raises(ValueError, match="data URL"):
        ANTHROPIC.write_request(request, model="c")


def test_a_final_assistant_prefill_loses_its_trailing_whitespace() -> None:
    request = chat_request(
        messages=(Message("user", (Text("q"),)), Message("assistant", (Text("The answer is "),)))
    )
    written = ANTHROPIC.write_request(request, model="c")
    assert written["messages"][-1]["content"] == [{"type": "text", "text": "The answer is"}]


def test_a_schema_without_a_type_gets_object() -> None:
    request = chat_request(tools=(Tool("t", None, {"properties": {}}),))
    (tool,) = ANTHROPIC.write_request(request, model="c")["tools"]
    assert tool["input_schema"] == {"type": "object", "properties": {}}


# Replies


ANTHROPIC_REPLY: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "thinking", "thinking": "Let me see.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_9", "name": LONG_NAME, "input": {"path": "x"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 12,
        "output_tokens": 40,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2000,
    },
}


def test_an_anthropic_reply_reads_into_the_canonical_form() -> None:
    reply = ANTHROPIC.read_reply(
        {**ANTHROPIC_REPLY, "content": [*ANTHROPIC_REPLY["content"], {"type": "server_tool_use"}]},
        CLAUDE_CODE_CANONICAL,
    )
    assert reply == Reply(
        id="msg_01",
        model="claude-sonnet-4-5-20250929",
        parts=(
            Thinking("Let me see.", signature="sig", origin="anthropic"),
            Thinking("", redacted="opaque", origin="anthropic"),
            Text("Reading it."),
            ToolCall("toolu_9", LONG_NAME, '{"path":"x"}'),
        ),
        stop=Stop.TOOL_USE,
        usage=CanonicalUsage(
            input_tokens=12, output_tokens=40, cache_read_tokens=2000, cache_write_tokens=100
        ),
    )


def test_a_reply_round_trips() -> None:
    canonical = ANTHROPIC.read_reply(ANTHROPIC_REPLY, CLAUDE_CODE_CANONICAL)
    written = ANTHROPIC.write_reply(canonical, CLAUDE_CODE_CANONICAL)
    assert written == ANTHROPIC_REPLY
    valid_message(written)


def test_a_body_that_is_not_a_message_is_refused() -> None:
    with pytest.raises(ValueError, match="content"):
        ANTHROPIC.read_reply({"type": "error", "error": {}}, CLAUDE_CODE_CANONICAL)


@pytest.mark.parametrize(
    ("wire", "stop"),
    [
        ("end_turn", Stop.END),
        ("max_tokens", Stop.LENGTH),
        ("model_context_window_exceeded", Stop.LENGTH),
        ("tool_use", Stop.TOOL_USE),
        ("stop_sequence", Stop.STOP_SEQUENCE),
        ("refusal", Stop.FILTERED),
        ("pause_turn", Stop.PAUSED),
        ("something_new", Stop.END),
        (None, Stop.END),
    ],
)
def test_stop_reasons_read(wire: str | None, stop: Stop) -> None:
    body = {**ANTHROPIC_REPLY, "stop_reason": wire}
    assert ANTHROPIC.read_reply(body, CLAUDE_CODE_CANONICAL).stop is stop


def test_a_chat_upstreams_reply_is_written_as_an_anthropic_message() -> None:
    reply = Reply(
        id="chatcmpl-abc",
        model="gpt-4o-2024-08-06",
        parts=(
            Thinking("reasoning text", origin="openai"),
            Text(""),
            Text("\n"),
            Text("Let me check."),
            ToolCall("call_1", "get_weather", '{"city":"Paris"}'),
            ToolCall("functions.get_time:2", "get_time", ""),
            ToolCall("call_3", "broken", '{"city":'),
            ToolCall("call_4", "listy", "[1, 2]"),
        ),
        stop=Stop.TOOL_USE,
        usage=CanonicalUsage(
            input_tokens=7, output_tokens=30, cache_read_tokens=3, reasoning_tokens=9
        ),
        created=1_700_000_000,
    )
    written = ANTHROPIC.write_reply(reply, chat_request())
    assert written == {
        "id": "msg_chatcmpl-abc",
        "type": "message",
        "role": "assistant",
        "model": "gpt-4o-2024-08-06",
        "content": [
            {"type": "thinking", "thinking": "reasoning text", "signature": ""},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "functions_get_time_2", "name": "get_time", "input": {}},
            {"type": "tool_use", "id": "call_3", "name": "broken", "input": {}},
            {"type": "tool_use", "id": "call_4", "name": "listy", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 7,
            "output_tokens": 30,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 3,
        },
    }
    valid_message(written)
    # The client sends the thinking back unsigned; the reader then treats it as not signed.
    echoed = ANTHROPIC.read_request(
        {
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "assistant", "content": written["content"][:1]}],
        }
    )
    assert echoed.messages[0].parts == (Thinking("reasoning text"),)


@pytest.mark.parametrize(
    ("stop", "sequence", "wire"),
    [
        (Stop.END, None, "end_turn"),
        (Stop.LENGTH, None, "max_tokens"),
        (Stop.TOOL_USE, None, "tool_use"),
        (Stop.STOP_SEQUENCE, "###", "stop_sequence"),
        (Stop.FILTERED, None, "refusal"),
        (Stop.PAUSED, None, "pause_turn"),
    ],
)
def test_stops_write_back(stop: Stop, sequence: str | None, wire: str) -> None:
    reply = Reply(id="msg_x", model="m", parts=(Text("t"),), stop=stop, stop_sequence=sequence)
    written = ANTHROPIC.write_reply(reply, chat_request())
    assert (written["id"], written["stop_reason"], written["stop_sequence"]) == (
        "msg_x",
        wire,
        sequence,
    )
    valid_message(written)
