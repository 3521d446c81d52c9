"""Bad input gets a clear 4xx in the client's own API shape and changes nothing."""

from __future__ import annotations

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
