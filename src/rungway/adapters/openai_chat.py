"""The OpenAI-compatible upstream family: OpenAI, DeepSeek, Groq, OpenRouter, Ollama, custom.

Quirks handled here:
- A streaming request gets `stream_options.include_usage` so the stream reports its tokens;
  when the client did not ask for that chunk, it is dropped again on the way back.
- `insufficient_quota` (and `credit_balance_exhausted`) come as HTTP 429 but are billing
  failures, not rate limits: classify on `type` as well as `code`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from rungway.adapters.base import (
    Connection,
    EventKind,
    UpstreamRequest,
    Usage,
    retry_after_seconds,
    with_model,
)
from rungway.protocol import openai_chat
from rungway.protocol.api import Api
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseEvent
from rungway.quota import read_x_ratelimit
from rungway.routing.snapshot import QuotaWindow

_FORWARDED_CLIENT_HEADERS = ("user-agent", "openai-beta", "x-stainless-")
_TRY_AGAIN = re.compile(r"(?i)try again in\s*(\d+(?:\.\d+)?)\s*(ms|s|seconds?)")
_USAGE = re.compile(rb'"usage"\s*:\s*\{')
_BILLING_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted", "billing_not_active"})
_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})


class OpenAIChatAdapter:
    """Chat Completions against any OpenAI-compatible base URL (which includes `/v1`)."""

    api = Api.OPENAI_CHAT

    def build_request(
        self,
        connection: Connection,
        *,
        body: dict[str, Any],
        raw_body: bytes,
        upstream_model: str,
        client_headers: Mapping[str, str],
        query: str,
    ) -> UpstreamRequest:
        """POST {base_url}/chat/completions, asking a stream to report its usage."""
        strip_usage = False
        if body.get("stream") is True:
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage") is True):
                options = options if isinstance(options, dict) else {}
                body = {**body, "stream_options": {**options, "include_usage": True}}
                strip_usage = True
        payload = (
            orjson.dumps({**body, "model": upstream_model})
            if strip_usage
            else with_model(body, raw_body, upstream_model)
        )
        return UpstreamRequest(
            url=f"{connection.base_url}/chat/completions",
            headers=_headers(connection, client_headers),
            body=payload,
            strip_usage_chunk=strip_usage,
        )

    def count_tokens_request(
        self,
        connection: Connection,
        *,
        raw_body: bytes,
        body: dict[str, Any],
        upstream_model: str,
        client_headers: Mapping[str, str],
    ) -> UpstreamRequest | None:
        """OpenAI-compatible APIs have no token-count endpoint."""
        return None

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """Map an OpenAI-shaped error response to a failure class."""
        error = _error_object(body)
        message = str(error.get("message") or f"HTTP {status}")
        code = str(error.get("code") or "")
        kind = str(error.get("type") or "")
        retry_after = retry_after_seconds(headers)

        def failure(cls: FailureClass, wait: float | None = None) -> Failure:
            return Failure(cls, message, status=status, retry_after_s=wait, body=body)

        if code in _BILLING_CODES or kind in _BILLING_CODES or status == 402:
            return failure(FailureClass.BILLING)
        if status == 429:
            return failure(FailureClass.RATE_LIMITED, retry_after or _wait_in_message(message))
        if code in _CONTEXT_CODES:
            return failure(FailureClass.CONTEXT_TOO_LONG)
        if status in (401, 403):
            return failure(FailureClass.AUTH)
        if status == 404:
            return failure(FailureClass.MODEL_UNAVAILABLE)
        if status == 408:
            return failure(FailureClass.TIMEOUT)
        if status in (503, 529):
            return failure(FailureClass.OVERLOADED, retry_after)
        if status >= 500:
            return failure(FailureClass.SERVER, retry_after)
        return failure(FailureClass.BAD_REQUEST)

    def read_usage(self, response: dict[str, Any]) -> Usage:
        """Usage of a `chat.completion`; cached prompt tokens are split out of the input."""
        return _usage(response.get("usage"))

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """The `x-ratelimit-*` windows (OpenAI, Groq, Cerebras and alike)."""
        return read_x_ratelimit(headers, now=now)

    def watch_stream(self, *, strip_usage_chunk: bool) -> OpenAIChatWatcher:
        """A watcher for one `chat.completion.chunk` stream."""
        return OpenAIChatWatcher(strip_usage_chunk)


class OpenAIChatWatcher:
    """Tracks one Chat Completions stream: content start, usage, in-stream errors."""

    __slots__ = ("_content_seen", "_strip_usage_chunk", "failure", "finished", "usage")

    def __init__(self, strip_usage_chunk: bool) -> None:
        self._strip_usage_chunk = strip_usage_chunk
        self._content_seen = False
        self.usage = Usage()
        self.failure: Failure | None = None
        self.finished = False

    def see(self, event: SseEvent) -> EventKind:
        """Classify one `data:` event."""
        data = event.data
        if data == b"[DONE]":
            self.finished = True
            return EventKind.CONTENT
        if b'"error"' in data:
            failure = _stream_failure(data)
            if failure is not None:
                self.failure = failure
                return EventKind.ERROR
        # Every chunk of a stream that asked for usage says `"usage":null`; only the last
        # carries an object. Substring tests rule out the rest before the regex runs.
        if b'"usage"' in data and b'"usage":null' not in data and _USAGE.search(data):
            chunk = orjson.loads(data)
            self.usage = _usage(chunk.get("usage"))
            if self._strip_usage_chunk and not chunk.get("choices"):
                return EventKind.DROP
        if not self._content_seen:
            if not openai_chat.is_content_chunk(data):
                return EventKind.PREAMBLE
            self._content_seen = True
        return EventKind.CONTENT


def _headers(connection: Connection, client_headers: Mapping[str, str]) -> dict[str, str]:
    headers = {
        name: value
        for name, value in client_headers.items()
        if name.startswith(_FORWARDED_CLIENT_HEADERS)
    }
    headers["content-type"] = "application/json"
    if connection.secret is not None:
        headers["authorization"] = f"Bearer {connection.secret.get_secret_value()}"
    return headers


def _error_object(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    if isinstance(parsed, list) and parsed:
        parsed = parsed[0]
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        return {"message": error}
    return {}


def _stream_failure(data: bytes) -> Failure | None:
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    error = chunk.get("error") if isinstance(chunk, dict) else None
    if not isinstance(error, dict):
        return None
    message = str(error.get("message") or "upstream error inside the stream")
    code = str(error.get("code") or error.get("type") or "")
    if code in _BILLING_CODES:
        return Failure(FailureClass.BILLING, message)
    if "rate_limit" in code:
        return Failure(FailureClass.RATE_LIMITED, message)
    if "overloaded" in code or code in {"server_is_overloaded", "slow_down"}:
        return Failure(FailureClass.OVERLOADED, message)
    return Failure(FailureClass.SERVER, message)


def _wait_in_message(message: str) -> float | None:
    match = _TRY_AGAIN.search(message)
    if match is None:
        return None
    value = float(match.group(1))
    return value / 1000 if match.group(2) == "ms" else value


def _usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt = int(raw.get("prompt_tokens") or 0)
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = int(prompt_details.get("cached_tokens") or 0)
    cache_write = int(prompt_details.get("cache_write_tokens") or 0)
    return Usage(
        input_tokens=max(0, prompt - cached - cache_write),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=cached,
        cache_write_tokens=cache_write,
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        cost_usd=_reported_cost(raw.get("cost")),
    )


def _reported_cost(value: object) -> float | None:
    # OpenRouter reports each request's cost in credits (US dollars) in `usage.cost`.
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None
