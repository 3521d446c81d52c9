"""The Gemini codec's requests and replies, against golden bodies and google-genai's types.

Every wire body a test builds or the codec writes is validated with the official SDK's
pydantic types (`extra="forbid"`, JSON mode so that signatures are read as base64).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import orjson
import pydantic
import pytest
from google.genai import types

from rungway.protocol.gemini import check_request
from rungway.translate.anthropic import ANTHROPIC
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
from rungway.translate.gemini import DROPPED_FIELDS, GEMINI
from rungway.translate.gemini_read import json_schema
from rungway.translate.gemini_stream import SKIP_SIGNATURE
from rungway.translate.openai_chat import OPENAI_CHAT
from rungway.translate.openai_responses import OPENAI_RESPONSES

FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures" / "gemini"
SIGNATURE = "CiQBcsjafF0xsYmEpbAEBp8="
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = orjson.loads((FIXTURES / name).read_bytes())
    return loaded


def valid_request(body: dict[str, Any]) -> dict[str, Any]:
    """`body` (rungway's form) checked field by field with the SDK's request types."""
    assert isinstance(body.pop("model"), str)
    assert isinstance(body.pop("stream"), bool)
    for content in body.pop("contents"):
        types.Content.model_validate_json(orjson.dumps(content))
    known: dict[str, type[pydantic.BaseModel]] = {
        "systemInstruction": types.Content,
        "toolConfig": types.ToolConfig,
        "generationConfig": types.GenerationConfig,
    }
    for name, kind in known.items():
        if name in body:
            kind.model_validate_json(orjson.dumps(body.pop(name)))
    for tool in body.pop("tools", []):
        types.Tool.model_validate_json(orjson.dumps(tool))
    for setting in body.pop("safetySettings", []):
        types.SafetySetting.model_validate_json(orjson.dumps(setting))
    assert body == {}, f"fields the SDK does not know: {sorted(body)}"
    return body


def valid_reply(body: dict[str, Any]) -> types.GenerateContentResponse:
    return types.GenerateContentResponse.model_validate_json(orjson.dumps(body))


def test_the_request_fixture_is_a_real_request() -> None:
    valid_request(fixture("request_full.json"))


def test_a_request_reads_into_the_canonical_form() -> None:
    request = GEMINI.read_request(fixture("request_full.json"))
    assert request.model == "gemini-2.5-flash"
    assert request.system == (Text("Be brief."), Text("Answer in English."))
    user, model, results, answer, last = request.messages
    assert user == Message(
        "user",
        (
            Text("What is in this picture, and what is the weather there?"),
            Image("image/png", "iVBORw0KGgoAAAANSUhEUg=="),
            Image(
                "image/jpeg", url="https://generativelanguage.googleapis.com/v1beta/files/abc123"
            ),
        ),
    )
    # Calls without ids get their place in the conversation; responses pair by name, in order.
    assert model.parts == (
        Thinking("The user wants the weather.", origin="gemini"),
        Thinking("", signature=SIGNATURE, origin="gemini"),
        ToolCall("call_1_1", "get_weather", '{"city":"Paris","unit":"celsius"}'),
        ToolCall("call_1_2", "get_weather", '{"city":"Lyon"}'),
    )
    assert results.parts == (
        ToolResult("call_1_1", (Text("18 C, clear"),)),
        ToolResult("call_1_2", (Text('{"temperature":21,"sky":"cloudy"}'),)),
    )
    assert answer.role == "assistant"
    assert last == Message("user", (Text("Summarise as JSON."),))
    weather, time = request.tools
    assert weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": ["string", "null"], "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    }
    assert time.parameters["additionalProperties"] is False
    assert request.tool_choice == ToolNamed("get_weather")
    assert (request.max_tokens, request.temperature, request.temperature_max) == (2048, 1.5, 2.0)
    assert (request.top_p, request.stop) == (0.9, ("END",))
    assert request.reasoning == Reasoning(budget_tokens=1024)
    assert request.output_format == OutputFormat(
        {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}
    )
    assert request.dropped == ("safetySettings", "generationConfig.topK")


def test_snake_case_fields_read_as_their_camel_case_twins() -> None:
    snake = {
        "model": "models/gemini-2.5-flash",
        "system_instruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {
                "role": "user",
                "parts": [{"inline_data": {"mime_type": "image/png", "data": "iVBO"}}],
            }
        ],
        "tool_config": {"function_calling_config": {"mode": "none"}},
        "generation_config": {
            "max_output_tokens": 10,
            "response_mime_type": "application/json",
            "thinking_config": {"thinking_budget": 0},
        },
    }
    request = GEMINI.read_request(snake)
    assert request.model == "gemini-2.5-flash"
    assert request.system == (Text("Be brief."),)
    assert request.messages == (Message("user", (Image("image/png", "iVBO"),)),)
    assert (request.tool_choice, request.max_tokens) == ("none", 10)
    assert request.output_format == OutputFormat()
    assert request.reasoning is None  # a budget of 0 turns thinking off
    assert request.dropped == ()


def conversation(*contents: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gemini-2.5-flash", "contents": list(contents)}


def test_a_call_id_the_client_sent_wins_and_responses_pair_by_name_in_order() -> None:
    body = conversation(
        {"role": "user", "parts": [{"text": "go"}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "a", "args": {}, "id": "given-1"}},
                {"functionCall": {"name": "b", "args": {}}},
                {"functionCall": {"name": "a", "args": {"n": 2}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "a", "response": {"output": "first a"}}},
                {"functionResponse": {"name": "a", "response": {"output": "second a"}}},
                {"functionResponse": {"name": "b", "response": {"error": "b failed"}}},
            ],
        },
    )
    _, calls, results = GEMINI.read_request(body).messages
    assert [part.id for part in calls.parts if isinstance(part, ToolCall)] == [
        "given-1",
        "call_1_1",
        "call_1_2",
    ]
    assert results.parts == (
        ToolResult("given-1", (Text("first a"),)),
        ToolResult("call_1_2", (Text("second a"),)),
        ToolResult("call_1_1", (Text("b failed"),), is_error=True),
    )


def test_the_same_conversation_sent_again_gets_the_same_ids() -> None:
    body = fixture("request_full.json")
    assert GEMINI.read_request(body) == GEMINI.read_request(fixture("request_full.json"))


@pytest.mark.parametrize(
    ("config", "choice", "tools"),
    [
        ({"mode": "AUTO"}, "auto", ["a", "b", "c"]),
        ({"mode": "NONE"}, "none", ["a", "b", "c"]),
        ({"mode": "ANY"}, "required", ["a", "b", "c"]),
        ({"mode": "ANY", "allowedFunctionNames": ["b"]}, ToolNamed("b"), ["a", "b", "c"]),
        ({"mode": "ANY", "allowedFunctionNames": ["a", "c"]}, "required", ["a", "c"]),
        ({"mode": "VALIDATED"}, "auto", ["a", "b", "c"]),
    ],
)
def test_function_calling_modes(config: dict[str, Any], choice: object, tools: list[str]) -> None:
    declarations = [{"name": name, "parameters": {"type": "OBJECT"}} for name in "abc"]
    body = conversation({"role": "user", "parts": [{"text": "hi"}]})
    body["tools"] = [{"functionDeclarations": declarations}]
    body["toolConfig"] = {"functionCallingConfig": config}
    request = GEMINI.read_request(body)
    assert request.tool_choice == choice
    assert [tool.name for tool in request.tools] == tools
    validated = "toolConfig.functionCallingConfig.mode.VALIDATED" in request.dropped
    assert validated == (config["mode"] == "VALIDATED")


@pytest.mark.parametrize(
    ("thinking", "reasoning"),
    [
        ({"thinkingBudget": 0}, None),
        ({"thinkingBudget": -1}, Reasoning(effort="medium")),
        ({"thinkingBudget": 4096, "includeThoughts": True}, Reasoning(budget_tokens=4096)),
        ({"thinkingLevel": "HIGH"}, Reasoning(effort="high")),
        ({"thinkingLevel": "low"}, Reasoning(effort="low")),
        ({"includeThoughts": True}, None),
    ],
)
def test_thinking_config_reads_as_reasoning(
    thinking: dict[str, Any], reasoning: Reasoning | None
) -> None:
    body = conversation({"role": "user", "parts": [{"text": "hi"}]})
    body["generationConfig"] = {"thinkingConfig": thinking}
    assert GEMINI.read_request(body).reasoning == reasoning


def test_what_the_reader_cannot_carry_is_named() -> None:
    body = conversation(
        {
            "role": "user",
            "parts": [
                {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}},
                {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
            ],
        }
    )
    body["tools"] = [{"googleSearch": {}}]
    body["cachedContent"] = "cachedContents/abc"
    body["generationConfig"] = {
        "candidateCount": 2,
        "seed": 7,
        "responseMimeType": "text/x.enum",
        "responseSchema": {"type": "STRING", "enum": ["a", "b"]},
    }
    dropped = GEMINI.read_request(body).dropped
    assert set(dropped) == {
        "contents.inlineData.application/pdf",
        "contents.executableCode",
        "tools.googleSearch",
        "cachedContent",
        "generationConfig.candidateCount",
        "generationConfig.seed",
        "generationConfig.responseMimeType.text/x.enum",
        "generationConfig.responseSchema",
    }


def test_gemini_schemas_read_as_json_schema() -> None:
    schema = {
        "type": "ARRAY",
        "items": {
            "type": "OBJECT",
            "nullable": True,
            "properties": {"type": {"type": "STRING"}, "tags": {"type": "ARRAY"}},
        },
    }
    assert json_schema(schema) == {
        "type": "array",
        "items": {
            "type": ["object", "null"],
            "properties": {"type": {"type": "string"}, "tags": {"type": "array"}},
        },
    }


CANONICAL = Request(
    model="client-model",
    system=(Text("Be brief."),),
    messages=(
        Message("user", (Text("Weather?"), Image(url="https://x.test/map.png"))),
        Message(
            "assistant",
            (
                Thinking("anthropic's", signature="sig-a", origin="anthropic"),
                Text("Checking."),
                ToolCall("toolu_1", "get_weather", '{"city":"Paris"}'),
                ToolCall("toolu_2", "get_weather", '{"city":"Lyon"}'),
            ),
        ),
        Message(
            "user",
            (
                ToolResult("toolu_2", (Text("21 C"),)),
                ToolResult("toolu_1", (Text('{"temp": 18}'),)),
                Text("And tomorrow?"),
            ),
        ),
    ),
    tools=(Tool("get_weather", "The weather.", WEATHER),),
    tool_choice="required",
    max_tokens=500,
    temperature=0.3,
    stop=("a", "b", "c", "d", "e", "f"),
    stream=True,
    reasoning=Reasoning(effort="low"),
    output_format=OutputFormat({"type": "object"}, name="weather", strict=True),
)


def test_a_canonical_request_writes_as_a_gemini_request() -> None:
    body = GEMINI.write_request(CANONICAL, model="models/gemini-2.5-pro")
    assert body == fixture("request_written.json")
    valid_request(body)


def test_a_gemini_signature_goes_back_on_its_part_and_foreign_calls_get_the_stand_in() -> None:
    request = Request(
        model="m",
        messages=(
            Message("user", (Text("go"),)),
            Message(
                "assistant",
                (Thinking("", signature=SIGNATURE, origin="gemini"), ToolCall("c1", "f", "{}")),
            ),
            Message("user", (ToolResult("c1", (Text("ok"),)),)),
            Message("assistant", (ToolCall("c2", "f", "{}"), ToolCall("c3", "f", "{}"))),
            Message("user", (ToolResult("c2", (Text("ok"),)), ToolResult("c3", (Text("ok"),)))),
        ),
    )
    contents = GEMINI.write_request(request, model="m")["contents"]
    first, second = contents[1]["parts"], contents[3]["parts"]
    assert first == [
        {"functionCall": {"name": "f", "args": {}, "id": "c1"}, "thoughtSignature": SIGNATURE}
    ]
    assert second[0]["thoughtSignature"] == SKIP_SIGNATURE
    assert "thoughtSignature" not in second[1]
    for content in contents:
        types.Content.model_validate_json(orjson.dumps(content))
    # The stand-in is never read back as a signature.
    back = GEMINI.read_request(GEMINI.write_request(request, model="m"))
    assert back.messages[3].parts == (ToolCall("c2", "f", "{}"), ToolCall("c3", "f", "{}"))


def test_a_tool_result_that_is_not_a_json_object_goes_under_output_or_error() -> None:
    request = Request(
        model="m",
        messages=(
            Message("assistant", (ToolCall("c1", "f", "{}"), ToolCall("c2", "f", "[1]"))),
            Message(
                "user",
                (
                    ToolResult("c1", (Text("[1, 2]"),)),
                    ToolResult("c2", (Text("boom"),), is_error=True),
                ),
            ),
        ),
    )
    model, results = GEMINI.write_request(request, model="m")["contents"]
    assert model["parts"][1]["functionCall"]["args"] == {"input": [1]}
    assert [part["functionResponse"]["response"] for part in results["parts"]] == [
        {"output": "[1, 2]"},
        {"error": "boom"},
    ]


# Replies


def test_a_reply_with_thoughts_and_calls_reads_into_the_canonical_form() -> None:
    body = fixture("reply_tools.json")
    valid_reply(body)
    reply = GEMINI.read_reply(body, CANONICAL)
    assert reply.id == "lHcwaOGBLJqF7M8P3c-l4Q4"
    assert reply.model == "gemini-2.5-flash"
    assert reply.parts == (
        Thinking("**Checking the weather**\nThe user asked about two cities.", origin="gemini"),
        Text("Let me look that up."),
        Thinking("", signature=SIGNATURE, origin="gemini"),
        ToolCall("call_lHcwaOGBLJqF7M8P3c-l4Q4_0", "get_weather", '{"city":"Paris"}'),
        ToolCall("call_lHcwaOGBLJqF7M8P3c-l4Q4_1", "get_weather", '{"city":"Lyon"}'),
    )
    assert reply.stop is Stop.TOOL_USE
    # 1,200 prompt tokens of which 1,000 cached; 100 thought tokens beside 40 candidates.
    assert reply.usage == CanonicalUsage(
        input_tokens=200, output_tokens=140, cache_read_tokens=1000, reasoning_tokens=100
    )


@pytest.mark.parametrize(
    ("name", "stop", "parts"),
    [
        ("reply_safety.json", Stop.FILTERED, ()),
        ("reply_prompt_blocked.json", Stop.FILTERED, ()),
        ("reply_max_tokens.json", Stop.LENGTH, (Text("The history of Paris begins"),)),
    ],
)
def test_blocks_and_limits_read_as_their_stops(
    name: str, stop: Stop, parts: tuple[Text, ...]
) -> None:
    body = fixture(name)
    valid_reply(body)
    reply = GEMINI.read_reply(body, CANONICAL)
    assert (reply.stop, reply.parts) == (stop, parts)


@pytest.mark.parametrize(
    "reason",
    ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"],
)
def test_every_filter_reason_is_filtered(reason: str) -> None:
    body = {"candidates": [{"finishReason": reason, "index": 0}], "responseId": "r"}
    valid_reply(body)
    assert GEMINI.read_reply(body, CANONICAL).stop is Stop.FILTERED


def test_a_reply_without_a_response_id_gets_call_ids_of_its_own() -> None:
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "f"}}]}}]
    }
    first = GEMINI.read_reply(body, CANONICAL).parts[0]
    second = GEMINI.read_reply(body, CANONICAL).parts[0]
    assert isinstance(first, ToolCall)
    assert isinstance(second, ToolCall)
    assert first.id != second.id


REPLY = Reply(
    id="msg_1",
    model="claude-sonnet-4-5",
    parts=(
        Thinking("Two cities.", signature="sig-a", origin="anthropic"),
        Text("Checking."),
        ToolCall("toolu_1", "get_weather", '{"city":"Paris"}'),
    ),
    stop=Stop.TOOL_USE,
    usage=CanonicalUsage(
        input_tokens=10,
        output_tokens=30,
        cache_read_tokens=100,
        cache_write_tokens=5,
        reasoning_tokens=12,
    ),
)


def test_a_canonical_reply_writes_as_a_gemini_reply() -> None:
    body = GEMINI.write_reply(REPLY, CANONICAL)
    valid_reply(body)
    assert body == {
        "candidates": [
            {
                "finishReason": "STOP",
                "index": 0,
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Two cities.", "thought": True},  # Anthropic's signature stays
                        {"text": "Checking."},
                        {
                            "functionCall": {
                                "name": "get_weather",
                                "args": {"city": "Paris"},
                                "id": "toolu_1",
                            }
                        },
                    ],
                },
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 115,
            "candidatesTokenCount": 18,
            "totalTokenCount": 145,
            "cachedContentTokenCount": 100,
            "thoughtsTokenCount": 12,
        },
        "modelVersion": "claude-sonnet-4-5",
        "responseId": "msg_1",
    }


@pytest.mark.parametrize(
    ("stop", "reason"),
    [(Stop.END, "STOP"), (Stop.LENGTH, "MAX_TOKENS"), (Stop.FILTERED, "SAFETY")],
)
def test_each_stop_writes_as_a_finish_reason(stop: Stop, reason: str) -> None:
    body = GEMINI.write_reply(dataclasses.replace(REPLY, parts=(), stop=stop), CANONICAL)
    valid_reply(body)
    assert body["candidates"][0]["finishReason"] == reason
    assert "content" not in body["candidates"][0]


def test_other_families_never_see_a_gemini_signature() -> None:
    reply = GEMINI.read_reply(fixture("reply_tools.json"), CANONICAL)
    anthropic = ANTHROPIC.write_reply(reply, CANONICAL)
    thinking = [block for block in anthropic["content"] if block["type"] == "thinking"]
    assert [block["signature"] for block in thinking] == [""]
    responses = OPENAI_RESPONSES.write_reply(reply, CANONICAL)
    reasoning = [item for item in responses["output"] if item["type"] == "reasoning"]
    assert all(not item.get("encrypted_content") for item in reasoning)
    chat = orjson.dumps(OPENAI_CHAT.write_reply(reply, CANONICAL))
    assert SIGNATURE.encode() not in chat
    assert SIGNATURE.encode() not in orjson.dumps(anthropic) + orjson.dumps(responses)
    # A Gemini client gets it back on its part.
    gemini = GEMINI.write_reply(reply, CANONICAL)
    parts = gemini["candidates"][0]["content"]["parts"]
    assert parts[2] == {
        "functionCall": {
            "name": "get_weather",
            "args": {"city": "Paris"},
            "id": "call_lHcwaOGBLJqF7M8P3c-l4Q4_0",
        },
        "thoughtSignature": SIGNATURE,
    }


def test_the_declared_drops_are_the_known_ones() -> None:
    assert "parallel_tool_calls" in DROPPED_FIELDS
    assert "user" in DROPPED_FIELDS
    assert "cache_write_tokens" in DROPPED_FIELDS
    assert "reasoning_tokens" not in DROPPED_FIELDS  # Gemini counts thoughts on their own


def test_images_in_a_tool_result_follow_its_function_response() -> None:
    request = Request(
        model="m",
        messages=(
            Message("assistant", (ToolCall("c1", "screenshot", "{}"),)),
            Message(
                "user",
                (
                    Text("Here it is."),
                    ToolResult("c1", (Text("saved"), Image("image/png", "iVBO"))),
                ),
            ),
        ),
    )
    _, turn = GEMINI.write_request(request, model="m")["contents"]
    assert turn["parts"] == [
        {"functionResponse": {"id": "c1", "name": "screenshot", "response": {"output": "saved"}}},
        {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
        {"text": "Here it is."},
    ]
    types.Content.model_validate_json(orjson.dumps(turn))


@pytest.mark.parametrize(
    ("reasoning", "budget"),
    [
        (Reasoning(effort="minimal"), 512),
        (Reasoning(effort="high"), 24576),
        (Reasoning(budget_tokens=3000), 3000),
        (Reasoning(budget_tokens=64000), 24576),
    ],
)
def test_reasoning_writes_as_a_thinking_budget_with_thoughts_included(
    reasoning: Reasoning, budget: int
) -> None:
    request = dataclasses.replace(CANONICAL, reasoning=reasoning)
    config = GEMINI.write_request(request, model="m")["generationConfig"]
    assert config["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": budget}


def test_a_multimodal_function_response_keeps_its_images() -> None:
    response = {
        "name": "screenshot",
        "response": {"output": "saved"},
        "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBO"}}],
    }
    types.FunctionResponse.model_validate_json(orjson.dumps(response))
    body = conversation(
        {"role": "model", "parts": [{"functionCall": {"name": "screenshot"}}]},
        {"role": "user", "parts": [{"functionResponse": response}]},
    )
    _, results = GEMINI.read_request(body).messages
    assert results.parts == (ToolResult("call_0_0", (Text("saved"), Image("image/png", "iVBO"))),)


def _paths(value: object, at: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every path into a JSON value, to its objects, arrays and leaves alike."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


ODD_VALUES: list[object] = [None, 0, -1, 2.5, True, "", "x", "MODEL", [], [1], ["x"], {}, {"a": 1}]


def test_any_request_the_checks_let_through_translates_without_failing() -> None:
    base = fixture("request_full.json")
    checked = 0
    for path in _paths(base)[1:]:
        for value in ODD_VALUES:
            body = orjson.loads(orjson.dumps(base))
            holder = body
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = value
            if check_request(body) is not None:
                continue
            checked += 1
            request = GEMINI.read_request(body)
            written = GEMINI.write_request(request, model="m")
            GEMINI.read_request(written)
    assert checked > 100  # many odd values are fine; each of them was translated


@pytest.mark.parametrize(
    ("model", "off"),
    [
        ("gemini-2.5-flash", True),
        ("models/gemini-2.5-flash-lite", True),
        ("gemini-2.5-flash-preview-09-2025", True),
        ("gemini-2.5-flash-001", True),
        ("gemini-2.5-flash-image", False),  # no thinking to turn off
        ("gemini-2.5-pro", False),  # cannot turn it off
        ("gemini-3-flash-preview", False),
    ],
)
def test_a_request_without_reasoning_turns_off_the_thinking_a_flash_model_does_unasked(
    model: str, off: bool
) -> None:
    request = dataclasses.replace(CANONICAL, reasoning=None)
    config = GEMINI.write_request(request, model=model)["generationConfig"]
    assert config.get("thinkingConfig") == ({"thinkingBudget": 0} if off else None)
