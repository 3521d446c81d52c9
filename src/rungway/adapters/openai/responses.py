"""The OpenAI Responses upstream family: `POST {base_url}/responses` with an API key.

A Responses stream is a sequence of `event: <type>` frames with no `[DONE]`; it ends with
`response.completed` (or `response.incomplete`), which alone carries the usage, or fails
with `response.failed` or a top-level `error` event inside the 200 stream
(docs/provider-signals.md B2). Until the first delta the stream is preamble a gateway may hold
back: `response.created`, `response.in_progress`, the Codex backend's `codex.rate_limits`
and the empty `output_item.added` / `content_part.added` openings. Usage counts cached
tokens inside `input_tokens`, so they are split out (B4.10).
"""

from __future__ import annotations

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
from rungway.adapters.openai.chat import OPENAI_SHAPE
from rungway.adapters.openai.errors import (
    classify_openai_failure,
    version_path_hint,
    wait_in_message,
)
from rungway.protocol import json_values, visible
from rungway.protocol.api import Api
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseEvent, SseSplitter
from rungway.protocol.usage import ReportedUsage
from rungway.quota import read_x_ratelimit
from rungway.routing.snapshot import QuotaWindow
from rungway.translate.openai_responses_stream import read_usage

TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})
"""Events that end a Responses stream well, carrying the final `response` and its usage."""
# Error codes of `response.failed` and `error` events (A3, A4.5; the first-party Codex
# client maps the same codes); any other code is a server failure.
_STREAM_ERROR_CODES = {
    "usage_limit_reached": FailureClass.QUOTA_EXHAUSTED,
    "rate_limit_exceeded": FailureClass.RATE_LIMITED,
    "server_is_overloaded": FailureClass.OVERLOADED,
    "slow_down": FailureClass.OVERLOADED,
    "insufficient_quota": FailureClass.BILLING,
    "usage_not_included": FailureClass.MODEL_UNAVAILABLE,
    "context_length_exceeded": FailureClass.CONTEXT_TOO_LONG,
}


class OpenAIResponsesAdapter:
    """The Responses API against an OpenAI-compatible base URL (which includes `/v1`)."""

    api = Api.OPENAI_RESPONSES
    versioned_base_url = True
    """Whether this family's base URLs include a version path (`/v1`); Codex's do not."""
    shape = OPENAI_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """POST {base_url}/responses with the client's body (only the model renamed)."""
        body = with_model(call.body, call.raw_body, call.model)
        return self.shape.request(call, "/responses", body)

    def count_tokens_request(self, call: UpstreamCall) -> UpstreamRequest | None:
        """Token counting is not proxied for Responses upstreams."""
        return None

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """Map an OpenAI-shaped error response to a failure class."""
        return classify_openai_failure(status, headers, body)

    def base_url_hint(self, base_url: str, status: int, body: bytes) -> str | None:
        """Suggest `{base_url}/v1` for a 404 from a base URL without a version path."""
        return version_path_hint(base_url, status, body) if self.versioned_base_url else None

    def read_usage(self, response: dict[str, Any]) -> ReportedUsage:
        """Usage of a `response` object; cached input tokens are split out of the input."""
        return read_responses_usage(response.get("usage"))

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """The `x-ratelimit-*` windows of an API key."""
        return read_x_ratelimit(headers, now=now)

    def watch_stream(self, *, strip_usage_chunk: bool) -> OpenAIResponsesWatcher:
        """A watcher for one Responses event stream."""
        return OpenAIResponsesWatcher()


class OpenAIResponsesWatcher:
    """Tracks one Responses stream: content start, usage, the final response, failures."""

    __slots__ = ("_content_seen", "failure", "finished", "response", "usage")

    def __init__(self) -> None:
        self._content_seen = False
        self.usage = ReportedUsage()
        self.failure: Failure | None = None
        self.finished = False
        self.response: dict[str, Any] | None = None
        """The final `response` object, once a terminal event has passed."""

    def see(self, event: SseEvent) -> EventKind:
        """Classify one event by its type (the `event:` line, else the data's `type`)."""
        kind = event.event or _event_type(event.data)
        if kind in TERMINAL_EVENTS:
            response = json_values.mapping(_json(event.data).get("response"))
            self.response = response
            self.usage = read_responses_usage(response.get("usage"))
            self.finished = True
            return EventKind.CONTENT
        if kind == "response.failed":
            response = json_values.mapping(_json(event.data).get("response"))
            self.failure = stream_failure(json_values.mapping(response.get("error")))
            return EventKind.ERROR
        if kind == "error":
            data = _json(event.data)
            # The error's fields sit at the top level (B2); some servers nest them.
            self.failure = stream_failure(json_values.mapping(data.get("error")) or data)
            return EventKind.ERROR
        if not self._content_seen:
            if not visible.responses(kind, event.data):
                return EventKind.PREAMBLE
            self._content_seen = True
        return EventKind.CONTENT


def stream_failure(error: Mapping[str, Any]) -> Failure:
    """The failure an in-stream error object (`{code, message}`) describes."""
    message = str(error.get("message") or "upstream error inside the stream")
    code = str(error.get("code") or error.get("type") or "")
    kind = _STREAM_ERROR_CODES.get(code, FailureClass.SERVER)
    wait = wait_in_message(message) if kind is FailureClass.RATE_LIMITED else None
    return Failure(kind, message, retry_after_s=wait)


def read_responses_usage(raw: object) -> ReportedUsage:
    """Token counts of a Responses `usage` object (B2, B4.10)."""
    return ReportedUsage.of(read_usage(raw))


def assemble_response(body: bytes) -> dict[str, Any] | Failure:
    """The final `response` object of a whole Responses stream, or why there is none.

    For a client that asked for no stream from an upstream that only streams (the Codex
    backend). The terminal event's `output` is used when it lists the items; otherwise
    the output is rebuilt from the `response.output_item.done` items, which is where the
    first-party Codex client reads them from (B2).
    """
    watcher = OpenAIResponsesWatcher()
    items: dict[int, dict[str, Any]] = {}
    for event in SseSplitter().feed(body if body.endswith(b"\n\n") else body + b"\n\n"):
        if watcher.see(event) is EventKind.ERROR and watcher.failure is not None:
            return watcher.failure
        if (event.event or _event_type(event.data)) == "response.output_item.done":
            data = _json(event.data)
            items[json_values.count(data.get("output_index"), len(items))] = json_values.mapping(
                data.get("item")
            )
    if watcher.response is None:
        return Failure(FailureClass.NETWORK, "stream closed before response.completed")
    response = dict(watcher.response)
    if not response.get("output") and items:
        response["output"] = [items[index] for index in sorted(items)]
    return response


def _event_type(data: bytes) -> str:
    return str(_json(data).get("type") or "")


def _json(data: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
