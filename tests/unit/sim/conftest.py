"""Shared simulated upstreams for the sim tests.

Each sim is started once per session and reset before every test that asks for it; its
FakeClock keeps moving forward across tests, and reset() re-anchors the windows to it.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from rungway.protocol.sse import SseEvent, SseSplitter
from rungway.sim import Scenario, SimUpstream

START = 1_790_000_000.0
SUBSCRIPTION_TOKEN = "sk-ant-oat01-test-plan"
API_KEY = "sk-ant-api03-test-key"
OPENAI_KEY = "sk-test-openai"
CLAUDE_CODE_HEADERS = {
    "user-agent": "claude-cli/2.1.332 (external, cli)",
    "x-app": "cli",
    "anthropic-beta": "claude-code-20250219,oauth-2025-04-20",
}
"""What Claude Code sends that a Claude plan checks (provider-signals A2.2, A2.6)."""
ANTHROPIC_HEADERS = {
    "authorization": f"Bearer {SUBSCRIPTION_TOKEN}",
    "anthropic-version": "2023-06-01",
    **CLAUDE_CODE_HEADERS,
    "content-type": "application/json",
}


def subscription_scenario() -> Scenario:
    """A Claude plan on a FakeClock: 5h and 7d windows plus a Fable-only 7d_oi window."""
    return Scenario.model_validate(
        {
            "name": "test-plan",
            "api": "anthropic",
            "quota_headers": "anthropic-unified",
            "auth": {"kind": "bearer", "token": SUBSCRIPTION_TOKEN},
            "models": [
                {"id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5"},
                {"id": "claude-fable-5", "max_output_tokens": 1000, "context_window": 50},
            ],
            "windows": [
                {"name": "5h", "claim": "five_hour", "capacity": 400, "length_s": 18000},
                {"name": "7d", "claim": "seven_day", "capacity": 100000, "length_s": 604800},
                {
                    "name": "7d_oi",
                    "claim": "seven_day_oi",
                    "capacity": 100,
                    "length_s": 604800,
                    "model": "claude-fable-5",
                },
            ],
            "clock": {"start": START},
            "response": {"output_tokens": 24, "chunk_tokens": 4},
        }
    )


def apikey_scenario() -> Scenario:
    """A metered Anthropic API key with a 3-requests-per-minute window."""
    return Scenario.model_validate(
        {
            "name": "test-apikey",
            "api": "anthropic",
            "quota_headers": "anthropic-apikey",
            "auth": {"kind": "x-api-key", "token": API_KEY},
            "models": [{"id": "claude-sonnet-4-5"}],
            "windows": [
                {"name": "requests", "unit": "requests", "capacity": 3, "length_s": 60},
                {"name": "tokens", "unit": "tokens", "capacity": 90000, "length_s": 60},
                {"name": "input-tokens", "unit": "input_tokens", "capacity": 80000, "length_s": 60},
                {
                    "name": "output-tokens",
                    "unit": "output_tokens",
                    "capacity": 16000,
                    "length_s": 60,
                },
            ],
            "clock": {"start": START},
            "response": {"text": "Hello from the metered key.", "chunk_tokens": 2},
        }
    )


def openai_scenario() -> Scenario:
    """An OpenAI-family upstream with request and token windows."""
    return Scenario.model_validate(
        {
            "name": "test-openai",
            "api": "openai",
            "quota_headers": "openai",
            "auth": {"kind": "bearer", "token": OPENAI_KEY},
            "models": [{"id": "gpt-4.1-mini", "max_output_tokens": 500}, {"id": "deepseek-chat"}],
            "windows": [
                {"name": "requests", "unit": "requests", "capacity": 5, "length_s": 60},
                {"name": "tokens", "unit": "tokens", "capacity": 2000, "length_s": 60},
            ],
            "clock": {"start": START},
            "response": {"output_tokens": 10, "chunk_tokens": 3},
        }
    )


@pytest.fixture(scope="session")
def _subscription_server() -> Iterator[SimUpstream]:
    with SimUpstream(subscription_scenario()) as sim:
        yield sim


@pytest.fixture(scope="session")
def _apikey_server() -> Iterator[SimUpstream]:
    with SimUpstream(apikey_scenario()) as sim:
        yield sim


@pytest.fixture(scope="session")
def _openai_server() -> Iterator[SimUpstream]:
    with SimUpstream(openai_scenario()) as sim:
        yield sim


@pytest.fixture
def subscription_sim(_subscription_server: SimUpstream) -> SimUpstream:
    """The Claude-plan sim, reset."""
    _subscription_server.reset()
    return _subscription_server


@pytest.fixture
def apikey_sim(_apikey_server: SimUpstream) -> SimUpstream:
    """The API-key sim, reset."""
    _apikey_server.reset()
    return _apikey_server


@pytest.fixture
def openai_sim(_openai_server: SimUpstream) -> SimUpstream:
    """The OpenAI-family sim, reset."""
    _openai_server.reset()
    return _openai_server


@dataclass
class RawResponse:
    """A response read with the standard library, header names exactly as sent."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """A header value, matching the name case-insensitively."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def json(self) -> Any:
        """The body parsed as JSON."""
        return orjson.loads(self.body)

    def events(self) -> list[SseEvent]:
        """The body split into SSE events."""
        return SseSplitter().feed(self.body)


def connect(url: str, timeout: float = 5) -> http.client.HTTPConnection:
    """An HTTP connection to a sim."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)


def request(
    url: str,
    method: str,
    path: str,
    body: object = None,
    headers: dict[str, str] | None = None,
) -> RawResponse:
    """Send one request with http.client and read the whole response."""
    connection = connect(url)
    try:
        payload = None if body is None else orjson.dumps(body)
        connection.request(method, path, body=payload, headers=headers or {})
        response = connection.getresponse()
        return RawResponse(response.status, response.getheaders(), response.read())
    finally:
        connection.close()


def message_body(**overrides: Any) -> dict[str, Any]:
    """A minimal Anthropic Messages request body."""
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Hello there"}],
    }
    body.update(overrides)
    return body


def chat_body(**overrides: Any) -> dict[str, Any]:
    """A minimal OpenAI chat-completions request body."""
    body: dict[str, Any] = {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": "Hello there"}],
    }
    body.update(overrides)
    return body
