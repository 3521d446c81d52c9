"""The OpenAI-compatible upstream family: OpenAI, DeepSeek, Groq, OpenRouter, Ollama, custom.

Quirks handled here:
- A streaming request gets `stream_options.include_usage` so the stream reports its tokens;
  when the client did not ask for that chunk, it is dropped again on the way back.
- Error bodies are OpenAI's, classified in `openai_errors` (shared with the Responses API).
- A 404 from a base URL without its version path says which URL was meant (`base_url_hint`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from rungway.adapters.base import (
    Connection,
    EventKind,
    UpstreamCall,
    UpstreamRequest,
    with_model,
)
from rungway.adapters.openai.errors import (
    BILLING_CODES,
    classify_openai_failure,
    version_path_hint,
)
from rungway.adapters.shape import RequestShape
from rungway.protocol import visible
from rungway.protocol.api import Api
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseEvent
from rungway.protocol.usage import ReportedUsage, reported_cost
from rungway.quota import read_x_ratelimit
from rungway.routing.snapshot import QuotaWindow
from rungway.translate.openai_chat_stream import read_usage as read_chat_usage

OPENAI_SHAPE = RequestShape(forwarded=("user-agent", "openai-beta", "x-stainless-"))
"""An OpenAI API request: the SDK's identity and beta opt-ins passed on, the key a bearer."""
_USAGE = re.compile(rb'"usage"\s*:\s*\{')


class OpenAIChatAdapter:
    """Chat Completions against any OpenAI-compatible base URL (which includes `/v1`)."""

    api = Api.OPENAI_CHAT
    versioned_base_url = True
    """Whether this family's base URLs include a version path (`/v1`); Copilot's do not."""
    shape = OPENAI_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """POST {base_url}/chat/completions, asking a stream to report its usage."""
        body = call.body
        strip_usage = False
        if call.stream:
            options = body.get("stream_options")
            if not (isinstance(options, dict) and options.get("include_usage") is True):
                options = options if isinstance(options, dict) else {}
                body = {**body, "stream_options": {**options, "include_usage": True}}
                strip_usage = True
        payload = (
            orjson.dumps({**body, "model": call.model})
            if strip_usage
            else with_model(body, call.raw_body, call.model)
        )
        return self.shape.request(call, "/chat/completions", payload, strip_usage_chunk=strip_usage)

    def count_tokens_request(self, call: UpstreamCall) -> UpstreamRequest | None:
        """OpenAI-compatible APIs have no token-count endpoint."""
        return None

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """Map an OpenAI-shaped error response to a failure class."""
        return classify_openai_failure(status, headers, body)

    def base_url_hint(self, base_url: str, status: int, body: bytes) -> str | None:
        """Suggest `{base_url}/v1` for a 404 from a base URL without a version path."""
        return version_path_hint(base_url, status, body) if self.versioned_base_url else None

    def read_usage(self, response: dict[str, Any]) -> ReportedUsage:
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
        self.usage = ReportedUsage()
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
            if not visible.chat(data):
                return EventKind.PREAMBLE
            self._content_seen = True
        return EventKind.CONTENT


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
    if code in BILLING_CODES:
        return Failure(FailureClass.BILLING, message)
    if "rate_limit" in code:
        return Failure(FailureClass.RATE_LIMITED, message)
    if "overloaded" in code or code in {"server_is_overloaded", "slow_down"}:
        return Failure(FailureClass.OVERLOADED, message)
    return Failure(FailureClass.SERVER, message)


def _usage(raw: object) -> ReportedUsage:
    if not isinstance(raw, dict):
        return ReportedUsage()
    # OpenRouter reports each request's cost in credits (US dollars) in `usage.cost`.
    return ReportedUsage.of(read_chat_usage(raw), reported_cost(raw.get("cost")))
