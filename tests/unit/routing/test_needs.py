"""What a request needs of a model, read from each API's parsed body."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from rungway.protocol.api import Api
from rungway.routing.needs import CHARS_PER_TOKEN, IMAGE_TOKENS, RequestNeeds, request_needs

IMAGE = "iVBORw0KGgo" * 5_000  # 55,000 characters of base64
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def needs(api: Api, body: dict[str, Any]) -> RequestNeeds:
    return request_needs(api, body, orjson.dumps(body))


def test_every_api_has_a_reader() -> None:
    # A text request with nothing special needs only room for its prompt, in every API.
    bodies: dict[Api, dict[str, Any]] = {
        Api.OPENAI_CHAT: {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        Api.OPENAI_RESPONSES: {"model": "m", "input": "hi"},
        Api.ANTHROPIC_MESSAGES: {"model": "m", "max_tokens": 9, "messages": []},
        Api.GEMINI: {"model": "m", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    }
    assert set(bodies) == set(Api)
    for api, body in bodies.items():
        found = needs(api, body)
        assert (found.vision, found.tools, found.structured) == (False, False, None), api
        assert found.prompt_tokens == len(orjson.dumps(body)) // CHARS_PER_TOKEN


@pytest.mark.parametrize(
    ("api", "body"),
    [
        (
            Api.OPENAI_CHAT,
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "what is it?"},
                            {
                                "type": "image_url",
                                "image_url": {"url": f"data:image/png;base64,{IMAGE}"},
                            },
                        ],
                    }
                ],
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "n", "schema": SCHEMA},
                },
            },
        ),
        (
            Api.OPENAI_RESPONSES,
            {
                "model": "m",
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "what is it?"},
                            {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}"},
                        ],
                    }
                ],
                "tools": [{"type": "function", "name": "f", "parameters": {}}],
                "text": {"format": {"type": "json_schema", "name": "n", "schema": SCHEMA}},
            },
        ),
        (
            Api.ANTHROPIC_MESSAGES,
            {
                "model": "m",
                "max_tokens": 9,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "what is it?"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": IMAGE,
                                },
                            },
                        ],
                    }
                ],
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
            },
        ),
        (
            Api.GEMINI,
            {
                "model": "m",
                "contents": [
                    {
                        "role": "user",
                        "parts": [
                            {"text": "what is it?"},
                            {"inlineData": {"mimeType": "image/png", "data": IMAGE}},
                        ],
                    }
                ],
                "tools": [{"functionDeclarations": [{"name": "f"}]}],
                "generationConfig": {
                    "responseMimeType": "application/json",
                    "responseJsonSchema": SCHEMA,
                },
            },
        ),
    ],
    ids=lambda value: value.value if isinstance(value, Api) else "",
)
def test_images_tools_and_a_schema_are_found_and_images_count_as_tokens_not_base64(
    api: Api, body: dict[str, Any]
) -> None:
    found = needs(api, body)
    assert (found.vision, found.tools, found.structured) == (True, True, "schema")
    # The image's own string is left out: OpenAI's carry it in a data URL.
    url = api in (Api.OPENAI_CHAT, Api.OPENAI_RESPONSES)
    text = len(orjson.dumps(body)) - len(IMAGE) - (len("data:image/png;base64,") if url else 0)
    assert found.prompt_tokens == text // CHARS_PER_TOKEN + IMAGE_TOKENS
    assert found.prompt_tokens < 2 * IMAGE_TOKENS  # not the 55,000 characters over four


@pytest.mark.parametrize(
    ("api", "body"),
    [
        (Api.OPENAI_CHAT, {"messages": [], "response_format": {"type": "json_object"}}),
        (Api.OPENAI_RESPONSES, {"input": "x", "text": {"format": {"type": "json_object"}}}),
        (
            Api.GEMINI,
            {"contents": [], "generationConfig": {"responseMimeType": "application/json"}},
        ),
        (
            Api.GEMINI,
            {"contents": [], "generation_config": {"response_mime_type": "application/json"}},
        ),
    ],
)
def test_any_json_object_is_a_json_need(api: Api, body: dict[str, Any]) -> None:
    assert needs(api, body).structured == "json"


def test_a_plain_text_format_needs_nothing_structured() -> None:
    body = {"messages": [], "response_format": {"type": "text"}}
    assert needs(Api.OPENAI_CHAT, body).structured is None


def test_an_image_in_a_tool_result_counts() -> None:
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    body = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": [block]}],
            }
        ]
    }
    assert needs(Api.ANTHROPIC_MESSAGES, body).vision is True
    output = {
        "type": "function_call_output",
        "call_id": "c",
        "output": [{"type": "input_image", "image_url": "https://x/y.png"}],
    }
    assert needs(Api.OPENAI_RESPONSES, {"input": [output]}).vision is True


def test_a_malformed_body_reads_as_needing_nothing_but_room() -> None:
    body: dict[str, Any] = {"messages": "nope", "tools": [], "response_format": 3}
    assert needs(Api.OPENAI_CHAT, body) == RequestNeeds(prompt_tokens=len(orjson.dumps(body)) // 4)


def test_the_word_of_an_image_marker_in_text_is_no_image() -> None:
    # The raw search only decides whether to look: the walk finds no image part.
    body = {"messages": [{"role": "user", "content": "what is an image_url?"}]}
    assert needs(Api.OPENAI_CHAT, body).vision is False
