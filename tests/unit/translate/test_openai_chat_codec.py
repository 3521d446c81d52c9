"""The Chat Completions codec reads client requests and upstream replies, and writes both."""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx2
import openai
import orjson
import pytest
from openai.types.chat import ChatCompletion
from openai.types.shared import ResponseFormatJSONObject, ResponseFormatJSONSchema

from rungway.protocol import openai_chat
from rungway.translate.canonical import (
    TOOL_MODES,
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
from rungway.translate.openai_chat import DROPPED_FIELDS, OPENAI_CHAT

LONG_NAME = "mcp__workspace_server__" + "search_every_document_in_the_shared_drive_" * 2
SHORT_NAME = short_tool_name(LONG_NAME)
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
PNG = "iVBORw0KGgo="


def read(**body: Any) -> Request:
    """A checked client body read by the codec."""
    body = {"model": "m", **body}
    assert openai_chat.check_request(body) is None
    return OPENAI_CHAT.read_request(body)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# read_request


def test_system_and_developer_messages_anywhere_become_the_system_in_order() -> None:
    request = read(
        messages=[
            {"role": "system", "content": "be brief"},
            user("hi"),
            {
                "role": "developer",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "late"},
            user("again"),
        ]
    )
    assert request.system == (Text("be brief"), Text("a"), Text("b"), Text("late"))
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]


def test_user_parts_keep_text_and_images_and_name_what_they_drop() -> None:
    request = read(
        messages=[
            {
                "role": "user",
                "name": "ann",
                "content": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"},
                    },
                    {"type": "image_url", "image_url": {"url": "https://x.test/cat.jpg"}},
                    {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}},
                    {"type": "file", "file": {"file_id": "file-1"}},
                ],
            }
        ]
    )
    assert request.messages == (
        Message(
            "user",
            (
                Text("look"),
                Image(media_type="image/png", data=PNG),
                Image(url="https://x.test/cat.jpg"),
            ),
        ),
    )
    assert request.dropped == (
        "messages.name",
        "image_url.detail",
        "content.input_audio",
        "content.file",
    )


def test_assistant_tool_calls_and_reasoning_content_are_read_in_order() -> None:
    request = read(
        messages=[
            user("weather?"),
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "need the tool",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get", "arguments": '{"q":"x"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "now", "arguments": ""},
                    },
                ],
            },
        ]
    )
    assert request.messages[1] == Message(
        "assistant",
        (
            Thinking("need the tool", origin="openai"),
            ToolCall("call_1", "get", '{"q":"x"}'),
            ToolCall("call_2", "now", "{}"),
        ),
    )


def test_consecutive_tool_messages_and_the_next_user_message_share_one_user_turn() -> None:
    request = read(
        messages=[
            user("go"),
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "one"},
            {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "two"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and?"},
                    {"type": "image_url", "image_url": {"url": "https://x.test/i.png"}},
                ],
            },
            user("next"),
        ]
    )
    assert [m.role for m in request.messages] == ["user", "assistant", "user", "user"]
    assert request.messages[2].parts == (
        ToolResult("a", (Text("one"),)),
        ToolResult("b", (Text("two"),)),
        Text("and?"),
        Image(url="https://x.test/i.png"),
    )
    assert request.messages[3].parts == (Text("next"),)
    assert request.dropped == ()


def test_an_image_in_a_tool_message_is_named_in_dropped() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x.test/i.png"}}
    tool = {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "t"}, image]}
    request = read(messages=[tool])
    assert request.messages == (Message("user", (ToolResult("a", (Text("t"),)),)),)
    assert request.dropped == ("content.image_url",)


def test_tools_and_options_are_read() -> None:
    request = read(
        messages=[user("hi")],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get",
                    "description": "d",
                    "parameters": SCHEMA,
                    "strict": True,
                },
            },
            {"type": "function", "function": {"name": "now"}},
            {"type": "custom", "custom": {"name": "grammar"}},
        ],
        tool_choice={"type": "function", "function": {"name": "get"}},
        parallel_tool_calls=False,
        max_completion_tokens=300,
        max_tokens=100,
        temperature=1.5,
        top_p=0.9,
        stop="END",
        stream=True,
        stream_options={"include_usage": True},
        reasoning_effort="low",
        user="u-1",
    )
    assert request.tools == (
        Tool("get", "d", SCHEMA),
        Tool("now", None, {"type": "object", "properties": {}}),
    )
    assert request.tool_choice == ToolNamed("get")
    assert request.parallel_tool_calls is False
    assert request.max_tokens == 300
    assert (request.temperature, request.temperature_max, request.top_p) == (1.5, 2.0, 0.9)
    assert request.stop == ("END",)
    assert request.stream
    assert request.include_usage
    assert request.reasoning == Reasoning(effort="low")
    assert request.user == "u-1"
    assert request.dropped == ("tools.strict", "tools.custom")


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"type": "function", "function": {"name": "get"}}, ToolNamed("get")),
        (None, None),
    ],
)
def test_tool_choice_is_read(choice: object, expected: object) -> None:
    assert read(messages=[user("x")], tool_choice=choice).tool_choice == expected


def test_legacy_max_tokens_and_a_list_of_stop_sequences() -> None:
    request = read(messages=[user("x")], max_tokens=64, stop=["a", "b"], reasoning_effort="none")
    assert (request.max_tokens, request.stop, request.reasoning) == (64, ("a", "b"), None)


def test_fields_without_a_canonical_place_are_named_in_dropped() -> None:
    dropped = {
        "n": 2,
        "logprobs": True,
        "top_logprobs": 3,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.5,
        "seed": 7,
        "logit_bias": {"1": 2},
        "response_format": {"type": "json_schema_v2"},
        "audio": {"voice": "alloy", "format": "wav"},
        "modalities": ["text", "audio"],
        "prediction": {"type": "content", "content": "x"},
        "service_tier": "flex",
        "store": True,
        "metadata": {"a": "b"},
        "web_search_options": {},
        "functions": [{"name": "f"}],
        "function_call": "auto",
        "verbosity": "low",
        "prompt_cache_key": "k",
        "safety_identifier": "s",
        "x_unknown": 1,
    }
    neutral = {
        "n": 1,
        "logprobs": False,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "seed": None,
    }
    # An unknown response format is named by its type, after the fields read past.
    expected = (
        *(key for key in dropped if key != "response_format"),
        "response_format.json_schema_v2",
    )
    assert read(messages=[user("x")], **dropped).dropped == expected
    assert read(messages=[user("x")], **neutral).dropped == ()


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"role": "wizard", "content": "x"}, "messages[0].role"),
        ({"role": "user", "content": 5}, "messages[0].content"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}, "url"),
        (
            {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f"}}]},
            "messages[0].tool_calls[0]",
        ),
    ],
)
def test_unreadable_messages_raise_value_error_saying_where(
    message: dict[str, Any], error: str
) -> None:
    # The gateway's check refuses most of these first; the reader stands on its own too.
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        OPENAI_CHAT.read_request({"model": "m", "messages": [message]})


# write_request

CONVERSATION = Request(
    model="claude-x",
    system=(Text("be brief", cache={"type": "ephemeral"}), Text("use tools")),
    messages=(
        Message("user", (Text("weather in Paris?", cache={"type": "ephemeral"}),)),
        Message(
            "assistant",
            (
                Thinking("let me check", signature="sig", origin="anthropic"),
                Thinking("", redacted="opaque", origin="anthropic"),
                Text("Checking."),
                ToolCall("toolu_1", LONG_NAME, '{"q":"Paris"}'),
                ToolCall("toolu_2", "now", ""),
            ),
        ),
        Message(
            "user",
            (
                ToolResult("toolu_1", (Text("18C"), Text("sunny"))),
                ToolResult("toolu_2", (Text("boom"),), is_error=True),
                Text("and tomorrow?"),
                Image(media_type="image/jpeg", data="/9j/"),
            ),
        ),
    ),
    tools=(Tool(LONG_NAME, "search", SCHEMA), Tool("now", None, {"type": "object"})),
    tool_choice=ToolNamed(LONG_NAME),
    parallel_tool_calls=False,
    max_tokens=1000,
    temperature=0.7,
    temperature_max=1.0,
    top_p=0.9,
    stop=("a", "b", "c", "d", "e"),
    stream=True,
    reasoning=Reasoning(budget_tokens=4096),
    user="u-1",
)


def test_write_request_golden() -> None:
    # A model the capability table does not know gets `max_tokens` and the asked-for effort.
    assert OPENAI_CHAT.write_request(CONVERSATION, model="house-model") == {
        "model": "house-model",
        "messages": [
            {"role": "system", "content": "be brief\n\nuse tools"},
            {"role": "user", "content": "weather in Paris?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "toolu_1",
                        "type": "function",
                        "function": {"name": SHORT_NAME, "arguments": '{"q":"Paris"}'},
                    },
                    {
                        "id": "toolu_2",
                        "type": "function",
                        "function": {"name": "now", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "toolu_1", "content": "18C\n\nsunny"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: boom"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and tomorrow?"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": SHORT_NAME, "description": "search", "parameters": SCHEMA},
            },
            {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
        ],
        "tool_choice": {"type": "function", "function": {"name": SHORT_NAME}},
        "parallel_tool_calls": False,
        "max_tokens": 1000,
        "temperature": 0.7,
        "top_p": 0.9,
        "stop": ["a", "b", "c", "d"],
        "stream": True,
        "stream_options": {"include_usage": True},
        "reasoning_effort": "medium",
        "user": "u-1",
    }
    assert len(SHORT_NAME) == 64 < len(LONG_NAME)


def test_written_request_is_accepted_by_the_openai_sdk_and_the_gateway_check() -> None:
    body = OPENAI_CHAT.write_request(CONVERSATION, model="house-model")
    assert openai_chat.check_request(body) is None
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(orjson.loads(request.content))
        return httpx2.Response(200, content=b"data: [DONE]\n\n", headers=SSE)

    with sdk(handler) as client:
        list(client.chat.completions.create(**body))  # unknown keyword arguments would raise
    assert sent == [body]


def test_tool_result_images_move_to_the_user_message_after_the_tool_messages() -> None:
    request = Request(
        model="m",
        messages=(
            Message(
                "user",
                (
                    ToolResult("c1", (Text("shot"), Image(url="https://x.test/s.png"))),
                    ToolResult("c2", (Image(media_type="image/png", data=PNG),)),
                ),
            ),
        ),
    )
    assert OPENAI_CHAT.write_request(request, model="m")["messages"] == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "shot\n\n[image in the next user message]",
        },
        {"role": "tool", "tool_call_id": "c2", "content": "[image in the next user message]"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://x.test/s.png"}},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
    ]


def test_thinking_alone_is_not_written_and_tool_choice_needs_tools() -> None:
    request = Request(
        model="m",
        messages=(
            Message("user", (Text("a"),)),
            Message("assistant", (Thinking("hmm", origin="openai"),)),
            Message("user", (Text("b"), Text("c"))),
        ),
        tool_choice="required",
        parallel_tool_calls=True,
        reasoning=Reasoning(effort="high", budget_tokens=1024),
    )
    assert OPENAI_CHAT.write_request(request, model="m") == {
        "model": "m",
        "messages": [
            {"role": "user", "content": "a"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "b"}, {"type": "text", "text": "c"}],
            },
        ],
        "reasoning_effort": "high",
    }


@pytest.mark.parametrize(
    ("budget", "effort"),
    [(1024, "low"), (2048, "low"), (2049, "medium"), (8192, "medium"), (8193, "high")],
)
def test_thinking_budget_becomes_an_effort(budget: int, effort: str) -> None:
    request = Request(model="m", messages=(), reasoning=Reasoning(budget_tokens=budget))
    assert OPENAI_CHAT.write_request(request, model="m")["reasoning_effort"] == effort


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_modes_are_written_as_strings(choice: str) -> None:
    mode = TOOL_MODES[choice]
    request = Request(model="m", messages=(), tools=(Tool("f", None, SCHEMA),), tool_choice=mode)
    assert OPENAI_CHAT.write_request(request, model="m")["tool_choice"] == choice


def test_a_chat_request_survives_the_round_trip() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "ok",
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"a":1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "done"},
            {"role": "user", "content": "thanks"},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": SCHEMA}}],
        "tool_choice": "auto",
        "max_tokens": 10,
        "temperature": 1.8,
        "stream": False,
    }
    written = OPENAI_CHAT.write_request(OPENAI_CHAT.read_request(body), model="m")
    assert written == {k: v for k, v in body.items() if k != "stream"}


# read_reply


def upstream_reply(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-up",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "deepseek-chat",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        **extra,
    }


def test_read_reply_restores_shortened_names_and_keeps_reasoning() -> None:
    body = upstream_reply(
        {
            "content": "Checking.",
            "reasoning_content": "think",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": SHORT_NAME, "arguments": '{"q":"P"}'},
                }
            ],
        },
        finish="tool_calls",
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 10},
            "completion_tokens_details": {"reasoning_tokens": 5},
        },
    )
    assert OPENAI_CHAT.read_reply(body, CONVERSATION) == Reply(
        id="chatcmpl-up",
        model="deepseek-chat",
        parts=(
            Thinking("think", origin="openai"),
            Text("Checking."),
            ToolCall("call_1", LONG_NAME, '{"q":"P"}'),
        ),
        stop=Stop.TOOL_USE,
        usage=CanonicalUsage(
            input_tokens=30,
            output_tokens=20,
            cache_read_tokens=60,
            cache_write_tokens=10,
            reasoning_tokens=5,
        ),
        created=1700000000,
    )


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", Stop.END),
        ("length", Stop.LENGTH),
        ("tool_calls", Stop.TOOL_USE),
        ("content_filter", Stop.FILTERED),
        ("function_call", Stop.TOOL_USE),
        ("something_new", Stop.END),
        (None, Stop.END),
    ],
)
def test_finish_reasons_are_read(finish: str | None, stop: Stop) -> None:
    body = upstream_reply({"content": "x"})
    body["choices"][0]["finish_reason"] = finish
    assert OPENAI_CHAT.read_reply(body, CONVERSATION).stop is stop


def test_a_tool_call_ending_in_stop_is_still_tool_use() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    body = upstream_reply({"content": None, "tool_calls": [call]}, finish="stop")
    assert OPENAI_CHAT.read_reply(body, CONVERSATION).stop is Stop.TOOL_USE


def test_deepseek_cache_hits_and_a_refusal_are_read() -> None:
    body = upstream_reply(
        {"content": None, "refusal": "no"},
        usage={"prompt_tokens": 50, "completion_tokens": 3, "prompt_cache_hit_tokens": 40},
    )
    reply = OPENAI_CHAT.read_reply(body, CONVERSATION)
    assert reply.parts == (Text("no"),)
    assert reply.usage == CanonicalUsage(input_tokens=10, output_tokens=3, cache_read_tokens=40)


def test_a_reply_call_without_an_id_gets_one() -> None:
    call = {"type": "function", "function": {"name": "now", "arguments": "{}"}}
    body = upstream_reply({"content": "", "tool_calls": [call]}, finish="tool_calls")
    assert OPENAI_CHAT.read_reply(body, CONVERSATION).parts == (ToolCall("call_0", "now", "{}"),)


def test_a_reply_without_choices_raises_value_error() -> None:
    with pytest.raises(ValueError, match="choices"):
        OPENAI_CHAT.read_reply({"id": "x", "choices": []}, CONVERSATION)


# write_reply

CLIENT = Request(model="gpt-4o", messages=(Message("user", (Text("hi"),)),))


def write(reply: Reply) -> dict[str, Any]:
    body = OPENAI_CHAT.write_reply(reply, CLIENT)
    ChatCompletion.model_validate(body, strict=False)
    return body


def test_write_reply_golden() -> None:
    reply = Reply(
        id="msg_01",
        model="claude-x",
        parts=(
            Thinking("step", signature="sig", origin="anthropic"),
            Thinking("", redacted="opaque", origin="anthropic"),
            Text("Hello "),
            Text("there."),
            ToolCall("toolu_1", "get", ""),
        ),
        stop=Stop.TOOL_USE,
        usage=CanonicalUsage(
            input_tokens=10,
            output_tokens=7,
            cache_read_tokens=100,
            cache_write_tokens=5,
            reasoning_tokens=3,
        ),
        created=1700000001,
    )
    assert write(reply) == {
        "id": "chatcmpl-msg_01",
        "object": "chat.completion",
        "created": 1700000001,
        "model": "claude-x",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Hello there.",
                    "refusal": None,
                    "reasoning_content": "step",
                    "tool_calls": [
                        {
                            "id": "toolu_1",
                            "type": "function",
                            "function": {"name": "get", "arguments": "{}"},
                        }
                    ],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 115,
            "completion_tokens": 7,
            "total_tokens": 122,
            "prompt_tokens_details": {"cached_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 3},
        },
    }


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        (Stop.END, "stop"),
        (Stop.STOP_SEQUENCE, "stop"),
        (Stop.LENGTH, "length"),
        (Stop.TOOL_USE, "tool_calls"),
        (Stop.FILTERED, "content_filter"),
        (Stop.PAUSED, "stop"),
    ],
)
def test_stops_are_written_as_finish_reasons(stop: Stop, finish: str) -> None:
    body = write(Reply(id="chatcmpl-1", model="m", parts=(Text("x"),), stop=stop))
    assert body["choices"][0]["finish_reason"] == finish
    assert body["id"] == "chatcmpl-1"


def test_only_tool_calls_give_null_content_and_nothing_gives_empty_text() -> None:
    calls = write(Reply(id="r", model="m", parts=(ToolCall("c", "f", "{}"),), stop=Stop.TOOL_USE))
    empty = write(Reply(id="r", model="", parts=(), stop=Stop.END))
    assert calls["choices"][0]["message"]["content"] is None
    assert empty["choices"][0]["message"]["content"] == ""
    assert empty["model"] == "gpt-4o"


def test_the_openai_sdk_reads_a_written_reply() -> None:
    reply = Reply(
        id="msg_9",
        model="claude-x",
        parts=(Text("hi"), ToolCall("toolu_1", "get", '{"q":"x"}')),
        stop=Stop.TOOL_USE,
        usage=CanonicalUsage(input_tokens=3, output_tokens=4, cache_read_tokens=2),
    )
    body = orjson.dumps(OPENAI_CHAT.write_reply(reply, CLIENT))
    with sdk(lambda _: httpx2.Response(200, content=body)) as client:
        completion = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    message = completion.choices[0].message
    assert message.content == "hi"
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert call.type == "function"
    assert (call.function.name, call.function.arguments) == ("get", '{"q":"x"}')
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.total_tokens) == (5, 9)


def test_every_field_the_writers_drop_is_listed() -> None:
    assert {
        "cache_control",
        "thinking",
        "thinking.signature",
        "redacted_thinking",
        "image.assistant",
        "stop_sequence",
        "stop.beyond_four",
        "reasoning.budget_tokens",
        "cache_write_tokens",
    } == DROPPED_FIELDS


def test_an_assistant_image_and_a_stop_sequence_leave_no_trace() -> None:
    request = Request(
        model="m", messages=(Message("assistant", (Image(url="https://x.test/a.png"), Text("a"))),)
    )
    assert OPENAI_CHAT.write_request(request, model="m")["messages"] == [
        {"role": "assistant", "content": "a"}
    ]
    reply = write(
        Reply(id="r", model="m", parts=(Text("a"),), stop=Stop.STOP_SEQUENCE, stop_sequence="END")
    )
    assert "END" not in orjson.dumps(reply).decode()


SSE = {"content-type": "text/event-stream"}


def sdk(handler: Any) -> openai.OpenAI:
    """An openai client whose HTTP calls `handler` answers."""
    transport = httpx2.MockTransport(handler)
    return openai.OpenAI(
        base_url="http://gateway.test/v1",
        api_key="k",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )


WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        (
            {
                "type": "json_schema",
                "json_schema": {"name": "w", "schema": WEATHER, "strict": True},
            },
            OutputFormat(WEATHER, "w", True),
        ),
        ({"type": "json_schema", "json_schema": {"name": "w"}}, OutputFormat(None, "w")),
        ({"type": "json_object"}, OutputFormat()),
        ({"type": "text"}, None),
    ],
)
def test_response_format_reads_as_the_output_format(
    response_format: dict[str, Any], expected: OutputFormat | None
) -> None:
    request = read(messages=[user("weather?")], response_format=response_format)
    assert (request.output_format, request.dropped) == (expected, ())


def test_a_json_schema_without_its_object_is_refused() -> None:
    with pytest.raises(ValueError, match="json_schema"):
        read(messages=[user("x")], response_format={"type": "json_schema"})


@pytest.mark.parametrize(
    ("output", "written", "sdk_type"),
    [
        (
            OutputFormat(WEATHER, "weather", True),
            {
                "type": "json_schema",
                "json_schema": {"name": "weather", "schema": WEATHER, "strict": True},
            },
            ResponseFormatJSONSchema,
        ),
        (
            OutputFormat(WEATHER),
            {"type": "json_schema", "json_schema": {"name": "output", "schema": WEATHER}},
            ResponseFormatJSONSchema,
        ),
        (OutputFormat(), {"type": "json_object"}, ResponseFormatJSONObject),
    ],
)
def test_the_output_format_is_written_as_response_format(
    output: OutputFormat, written: dict[str, Any], sdk_type: type[Any]
) -> None:
    request = Request(model="m", messages=(Message("user", (Text("weather?"),)),))
    body = OPENAI_CHAT.write_request(
        dataclasses.replace(request, output_format=output), model="gpt-4.1"
    )
    assert body["response_format"] == written
    assert sdk_type.model_validate(written).model_dump(exclude_none=True, by_alias=True) == written
    assert openai_chat.check_request(body) is None
    sent: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(orjson.loads(request.content))
        return httpx2.Response(200, json=CHAT_REPLY)

    with sdk(handler) as client:
        client.chat.completions.create(**body)
    assert sent == [body]


CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4.1",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "{}"},
            "finish_reason": "stop",
        }
    ],
}


@pytest.mark.parametrize(
    ("model", "limit", "effort"),
    [
        ("o3", "max_completion_tokens", "high"),
        ("gpt-5-mini", "max_completion_tokens", "high"),
        ("o4-mini-2025-04-16", "max_completion_tokens", "high"),
        ("gpt-4o", "max_tokens", None),
        ("deepseek-chat", "max_tokens", None),
        ("deepseek-reasoner", "max_tokens", "high"),
        ("house-model", "max_tokens", "high"),
    ],
)
def test_reasoning_models_get_max_completion_tokens_and_only_they_an_effort(
    model: str, limit: str, effort: str | None
) -> None:
    request = Request(
        model="client",
        messages=(Message("user", (Text("think"),)),),
        max_tokens=500,
        reasoning=Reasoning(effort="high"),
    )
    body = OPENAI_CHAT.write_request(request, model=model)
    assert body[limit] == 500
    other = "max_tokens" if limit == "max_completion_tokens" else "max_completion_tokens"
    assert other not in body
    assert body.get("reasoning_effort") == effort
