"""Bad input gets a clear 4xx in the client's own API shape and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.integration.conftest import CLAUDE, DEEPSEEK, RunningGateway, StartGateway, Upstreams

ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
OPENAI_HEADERS = {"content-type": "application/json"}


@pytest.fixture
def gateway(start_gateway: StartGateway, sims: Upstreams) -> Iterator[RunningGateway]:
    running = start_gateway(server={"max_body_bytes": 4096})
    yield running
    assert running.rows() == [], "a refused request left a ledger row"
    assert all(sim.requests == [] for sim in sims.all()), "a refused request reached upstream"


def _openai_error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert response.headers["x-rungway-request-id"]
    return dict(body["error"])


def _anthropic_error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body["type"] == "error"
    assert {"type", "message"} <= set(body["error"]) <= {"type", "message", "code"}
    return dict(body["error"])


def test_malformed_json(gateway: RunningGateway) -> None:
    chat = httpx.post(
        f"{gateway.url}/v1/chat/completions", content=b'{"model": ', headers=OPENAI_HEADERS
    )
    assert chat.status_code == 400
    assert "not valid JSON" in _openai_error(chat)["message"]
    messages = httpx.post(f"{gateway.url}/v1/messages", content=b"[1,", headers=ANTHROPIC_HEADERS)
    assert messages.status_code == 400
    error = _anthropic_error(messages)
    assert error["type"] == "invalid_request_error"
    assert "not valid JSON" in error["message"]


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("/v1/chat/completions", [], "must be a JSON object"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x"}]},
            "`model` is required",
        ),
        (
            "/v1/chat/completions",
            {"model": DEEPSEEK, "messages": "hello"},
            "`messages` is required",
        ),
        (
            "/v1/chat/completions",
            {"model": 7, "messages": [{"role": "user", "content": "x"}]},
            "`model`",
        ),
        (
            "/v1/chat/completions",
            {"model": DEEPSEEK, "messages": [{"role": "user", "content": "x"}], "stream": "yes"},
            "`stream` must be a boolean",
        ),
        (
            "/v1/messages",
            {"model": CLAUDE, "messages": [{"role": "user", "content": "x"}]},
            "max_tokens",
        ),
        (
            "/v1/messages",
            {"model": CLAUDE, "max_tokens": "ten", "messages": [{"role": "user", "content": "x"}]},
            "max_tokens",
        ),
        ("/v1/messages", {"model": CLAUDE, "max_tokens": 5, "messages": ["hi"]}, "messages"),
    ],
)
def test_wrong_field_types_are_named(
    gateway: RunningGateway, path: str, body: object, expected: str
) -> None:
    headers = ANTHROPIC_HEADERS if path == "/v1/messages" else OPENAI_HEADERS
    response = httpx.post(f"{gateway.url}{path}", json=body, headers=headers)
    assert response.status_code == 400
    error = _anthropic_error(response) if path == "/v1/messages" else _openai_error(response)
    assert expected in error["message"]


def test_unknown_model_lists_what_exists(gateway: RunningGateway) -> None:
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(
        openai.NotFoundError, match=r"'gpt-9' is not served.*available:.*deepseek-chat"
    ):
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "x"}])
    claude = anthropic.Anthropic(base_url=gateway.url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.NotFoundError, match="not served by any connection"):
        claude.messages.create(
            model="claude-nope", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )


def test_a_request_that_cannot_be_translated_says_what_is_wrong(
    gateway: RunningGateway,
) -> None:
    # A Chat request whose tool call has no id cannot be carried to a Messages upstream.
    broken = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
        ],
    }
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json=broken)
    assert response.status_code == 400
    assert "cannot be translated" in _openai_error(response)["message"]
    assert gateway.rows() == []


def test_body_over_the_limit(gateway: RunningGateway) -> None:
    big = {"model": DEEPSEEK, "messages": [{"role": "user", "content": "x" * 5000}]}
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json=big)
    assert response.status_code == 413
    assert "limit of 4096 bytes" in _openai_error(response)["message"]

    def chunks() -> Iterator[bytes]:
        yield b'{"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", '
        yield b'"content": "' + b"y" * 5000 + b'"}]}'

    chunked = httpx.post(f"{gateway.url}/v1/messages", content=chunks(), headers=ANTHROPIC_HEADERS)
    assert chunked.status_code == 413
    assert _anthropic_error(chunked)["type"] == "request_too_large"


def test_unknown_paths_and_wrong_methods(gateway: RunningGateway) -> None:
    missing = httpx.post(f"{gateway.url}/v1/completions", json={})
    assert missing.status_code == 404
    assert "no such endpoint" in _openai_error(missing)["message"]
    wrong = httpx.get(f"{gateway.url}/v1/messages", headers={"anthropic-version": "2023-06-01"})
    assert wrong.status_code == 405
    assert "use POST" in _anthropic_error(wrong)["message"]


def test_client_keys_are_required_once_configured(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNGWAY_IT_CLIENT_KEY", "rk-team-alpha")
    gateway = start_gateway(
        client_keys=[{"name": "alpha", "key": {"env": "RUNGWAY_IT_CLIENT_KEY"}}]
    )
    hello: list[Any] = [{"role": "user", "content": "x"}]
    anonymous = httpx.post(
        f"{gateway.url}/v1/chat/completions", json={"model": DEEPSEEK, "messages": hello}
    )
    assert anonymous.status_code == 401
    assert "no client key" in _openai_error(anonymous)["message"]
    wrong = anthropic.Anthropic(base_url=gateway.url, api_key="rk-guess", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError, match="not valid for this gateway"):
        wrong.messages.create(model=CLAUDE, max_tokens=5, messages=hello)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="rk-guess", max_retries=0).models.list()
    assert gateway.rows() == []

    right = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="rk-team-alpha", max_retries=0)
    right.chat.completions.create(model=DEEPSEEK, messages=hello)
    by_header = anthropic.Anthropic(base_url=gateway.url, api_key="rk-team-alpha", max_retries=0)
    by_header.messages.create(model=CLAUDE, max_tokens=5, messages=hello)
    assert [row["client_key"] for row in gateway.rows()] == ["alpha", "alpha"]


def _with_nested(body: dict[str, Any], depth: int) -> bytes:
    """`body` with a field nested `depth` levels deep (the body itself is the first)."""
    nested = b"[" * (depth - 1) + b"1" + b"]" * (depth - 1)
    return _compact(body)[:-1] + b',"extra":' + nested + b"}"


def _schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth - 1):
        schema = {"x": schema}
    return schema


def _compact(body: object) -> bytes:
    # Deep bodies stay under the test gateway's body limit without the usual spaces.
    return json.dumps(body, separators=(",", ":")).encode()


HELLO: list[Any] = [{"role": "user", "content": "x"}]


# 65 is one past the limit, 300 is past the encoder's own limit, 1,500 past the parser's.
@pytest.mark.parametrize("depth", [65, 300, 1000, 1500])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        # An alias rewrites `model`, so the body is encoded again before it goes out.
        ("/v1/chat/completions", {"model": "fast", "messages": HELLO}),
        ("/v1/messages", {"model": "claude-sonnet-4-5-x", "max_tokens": 5, "messages": HELLO}),
        ("/v1/messages/count_tokens", {"model": "claude-sonnet-4-5-x", "messages": HELLO}),
        ("/v1/responses", {"model": "fast", "input": "x"}),
    ],
)
def test_absurd_nesting_is_refused_at_the_door(
    gateway: RunningGateway, path: str, body: dict[str, Any], depth: int
) -> None:
    response = httpx.post(
        f"{gateway.url}{path}",
        content=_with_nested(body, depth),
        headers=ANTHROPIC_HEADERS,
    )
    assert response.status_code == 400, response.text
    error = _anthropic_error(response) if "/messages" in path else _openai_error(response)
    assert "nested too deeply" in error["message"]
    assert "at most 64 levels" in error["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        # Tool schemas are translated for an upstream of another API.
        (
            "/v1/chat/completions",
            {
                "model": CLAUDE,
                "messages": HELLO,
                "tools": [{"type": "function", "function": {"name": "f", "parameters": 300}}],
            },
        ),
        (
            "/v1/messages",
            {
                "model": DEEPSEEK,
                "max_tokens": 5,
                "messages": HELLO,
                "tools": [{"name": "f", "input_schema": 300}],
            },
        ),
    ],
)
def test_deep_tool_schemas_are_refused_before_translation(
    gateway: RunningGateway, path: str, body: dict[str, Any]
) -> None:
    tool = body["tools"][0]
    holder = tool.get("function", tool)
    key = "parameters" if "parameters" in holder else "input_schema"
    holder[key] = _schema(300)
    response = httpx.post(f"{gateway.url}{path}", content=_compact(body), headers=ANTHROPIC_HEADERS)
    assert response.status_code == 400, response.text
    error = _anthropic_error(response) if path == "/v1/messages" else _openai_error(response)
    assert "nested" in error["message"]


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        (
            "/v1/messages",
            {"model": CLAUDE, "max_tokens": 5, "messages": HELLO, "tools": 7},
            "tools",
        ),
        (
            "/v1/messages",
            {"model": DEEPSEEK, "max_tokens": 5, "messages": HELLO, "tools": 7},
            "tools",
        ),
        (
            "/v1/messages",
            {"model": DEEPSEEK, "max_tokens": 5, "messages": HELLO, "metadata": [1]},
            "metadata",
        ),
        ("/v1/chat/completions", {"model": DEEPSEEK, "messages": HELLO, "tools": 7}, "tools"),
        ("/v1/chat/completions", {"model": CLAUDE, "messages": HELLO, "tools": 7}, "tools"),
        ("/v1/responses", {"model": DEEPSEEK, "input": "x", "tools": 7}, "tools"),
    ],
)
def test_wrong_shapes_that_used_to_crash_are_400s(
    gateway: RunningGateway, path: str, body: dict[str, Any], expected: str
) -> None:
    response = httpx.post(f"{gateway.url}{path}", json=body, headers=ANTHROPIC_HEADERS)
    assert response.status_code == 400, response.text
    error = _anthropic_error(response) if path == "/v1/messages" else _openai_error(response)
    assert expected in error["message"]


LONG_NAME = "claude-sonnet-" + "x" * 243  # 257 characters: one past the limit


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": LONG_NAME, "messages": HELLO}),
        ("/v1/messages", {"model": LONG_NAME, "max_tokens": 5, "messages": HELLO}),
        ("/v1/messages/count_tokens", {"model": LONG_NAME, "messages": HELLO}),
        ("/v1/responses", {"model": LONG_NAME, "input": "x"}),
    ],
)
def test_over_long_model_names_are_refused(
    gateway: RunningGateway, path: str, body: dict[str, Any]
) -> None:
    response = httpx.post(f"{gateway.url}{path}", json=body, headers=ANTHROPIC_HEADERS)
    assert response.status_code == 400, response.text
    error = _anthropic_error(response) if "/messages" in path else _openai_error(response)
    assert "257 characters long; a model name has at most 256" in error["message"]


CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        # Chat, to its own API (deepseek-chat) and translated (claude-sonnet-4-5).
        (CHAT, {"model": DEEPSEEK, "messages": HELLO, "max_tokens": True}, "`max_tokens` must be"),
        (CHAT, {"model": DEEPSEEK, "messages": HELLO, "max_tokens": -1}, "not -1"),
        (CHAT, {"model": DEEPSEEK, "messages": HELLO, "max_tokens": "x"}, "not a string"),
        (CHAT, {"model": DEEPSEEK, "messages": HELLO, "max_tokens": 2**31}, "2147483647"),
        (CHAT, {"model": CLAUDE, "messages": HELLO, "max_completion_tokens": 0}, "not 0"),
        (CHAT, {"model": CLAUDE, "messages": HELLO, "temperature": "hot"}, "`temperature`"),
        (CHAT, {"model": CLAUDE, "messages": HELLO, "stop": [1]}, "`stop`"),
        (CHAT, {"model": CLAUDE, "messages": HELLO, "reasoning_effort": 3}, "reasoning_effort"),
        (CHAT, {"model": CLAUDE, "messages": HELLO, "stream_options": []}, "stream_options"),
        (CHAT, {"model": CLAUDE, "messages": [{"role": "robot", "content": "x"}]}, ".role"),
        (CHAT, {"model": CLAUDE, "messages": [{"role": "user", "content": 7}]}, ".content"),
        (
            CHAT,
            {"model": CLAUDE, "messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages[0].content[0].text",
        ),
        (CHAT, {"model": CLAUDE, "messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        (
            CHAT,
            {"model": DEEPSEEK, "messages": [{"role": "assistant", "tool_calls": {}}]},
            "tool_calls",
        ),
        (
            CHAT,
            {"model": CLAUDE, "messages": HELLO, "tools": [{"type": "function", "function": 1}]},
            "tools[0].function",
        ),
        (
            CHAT,
            {"model": CLAUDE, "messages": HELLO, "tools": [TOOL], "tool_choice": {"type": 1}},
            "tool_choice",
        ),
        # Messages, to its own API (claude-sonnet-4-5) and translated (deepseek-chat).
        (MESSAGES, {"model": CLAUDE, "max_tokens": 2**31, "messages": HELLO}, "2147483647"),
        (MESSAGES, {"model": CLAUDE, "max_tokens": 1.5, "messages": HELLO}, "max_tokens"),
        (
            MESSAGES,
            {"model": DEEPSEEK, "max_tokens": 5, "messages": [{"role": "user", "content": 1}]},
            "messages.0.content",
        ),
        (
            MESSAGES,
            {
                "model": DEEPSEEK,
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}],
            },
            "messages.0.content.0.text",
        ),
        (
            MESSAGES,
            {
                "model": CLAUDE,
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": 1}]}
                ],
            },
            "tool_use_id",
        ),
        (MESSAGES, {"model": DEEPSEEK, "max_tokens": 5, "messages": HELLO, "system": 5}, "system"),
        (
            MESSAGES,
            {"model": DEEPSEEK, "max_tokens": 5, "messages": HELLO, "stop_sequences": "x"},
            "stop_sequences",
        ),
        (
            MESSAGES,
            {"model": DEEPSEEK, "max_tokens": 5, "messages": HELLO, "metadata": {"user_id": 7}},
            "metadata.user_id",
        ),
        (
            MESSAGES,
            {
                "model": DEEPSEEK,
                "max_tokens": 5,
                "messages": HELLO,
                "thinking": {"type": "enabled", "budget_tokens": "x"},
            },
            "thinking.budget_tokens",
        ),
        (
            MESSAGES,
            {"model": DEEPSEEK, "max_tokens": 5, "messages": HELLO, "tool_choice": {"type": 1}},
            "tool_choice.type",
        ),
        # Responses, translated to both other APIs.
        (RESPONSES, {"model": DEEPSEEK, "input": "x", "max_output_tokens": -5}, "not -5"),
        (RESPONSES, {"model": CLAUDE, "input": "x", "reasoning": {"effort": 1}}, "reasoning"),
        (RESPONSES, {"model": CLAUDE, "input": "x", "tools": [{"name": "f"}]}, "tools[0].type"),
        (
            RESPONSES,
            {"model": CLAUDE, "input": [{"type": "function_call", "name": "f"}]},
            "input[0].call_id",
        ),
        (
            RESPONSES,
            {"model": DEEPSEEK, "input": [{"role": "user", "content": [{"type": 5}]}]},
            "input[0].content[0]",
        ),
    ],
)
def test_wrong_types_below_the_top_level_are_named(
    gateway: RunningGateway, path: str, body: dict[str, Any], expected: str
) -> None:
    response = httpx.post(f"{gateway.url}{path}", json=body, headers=ANTHROPIC_HEADERS)
    assert response.status_code == 400, response.text
    error = _anthropic_error(response) if path == MESSAGES else _openai_error(response)
    assert expected in error["message"]


def test_an_output_limit_past_any_model_is_a_400_not_a_budget_429(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway(ladder={"rung_budget_usd": {"cheap": 0.05}})
    body = {"model": DEEPSEEK, "messages": HELLO, "max_tokens": 2**31}
    response = httpx.post(f"{gateway.url}/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    assert "from 1 to 2147483647" in _openai_error(response)["message"]
    assert gateway.rows() == []
    assert sims.cheap.requests == []


def test_a_key_sent_twice_goes_upstream_once_as_the_gateway_read_it(
    start_gateway: StartGateway, sims: Upstreams
) -> None:
    gateway = start_gateway()
    raw = (
        b'{"model":"deepseek-chat","messages":[{"role":"user","content":"x"}],'
        b'"max_tokens":1,"max_tokens":16}'
    )
    response = httpx.post(f"{gateway.url}/v1/chat/completions", content=raw)
    assert response.status_code == 200, response.text
    (sent,) = sims.cheap.requests
    assert sent.raw_body.count(b'"max_tokens"') == 1
    assert sent.body["max_tokens"] == 16
