"""The Anthropic Messages upstream family: API keys and Claude plan (OAuth) logins.

A plan login authenticates with `Authorization: Bearer` and needs the `oauth-2025-04-20`
beta flag; an API key uses `x-api-key`. The client's own identity headers (user agent,
`x-app`, `anthropic-beta`, `x-stainless-*`) are passed through as sent and never invented.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rungway.adapters.base import (
    Connection,
    CredentialHeaders,
    EventKind,
    UpstreamCall,
    UpstreamRequest,
    retry_after_seconds,
    with_model,
)
from rungway.adapters.shape import JSON, RequestShape
from rungway.protocol import visible
from rungway.protocol.api import Api
from rungway.protocol.auth import Auth
from rungway.protocol.failures import Failure, FailureClass
from rungway.protocol.sse import SseEvent
from rungway.protocol.usage import CountReader, ReportedUsage
from rungway.quota import (
    NO_OVERAGE,
    OverageReading,
    read_anthropic_api_key,
    read_anthropic_overage,
    read_anthropic_unified,
    refuses_client,
)
from rungway.quota.poller import PollTarget
from rungway.quota.usage import read_claude_usage
from rungway.routing.snapshot import QuotaWindow

API_VERSION = "2023-06-01"
_UNSIGNED = b'"signature":""'  # thinking another provider made, as compact JSON
_UNSIGNED_SPACED = b'"signature": ""'  # and as spaced JSON
OAUTH_BETA = "oauth-2025-04-20"
ANTHROPIC_SHAPE = RequestShape(
    forwarded=(
        "anthropic-beta",
        "anthropic-version",
        "anthropic-dangerous-direct-browser-access",
        "user-agent",
        "x-app",
        "x-stainless-",
        "x-claude-code-",
    ),
    key_header="x-api-key",
    fixed=JSON,
    defaults=(("anthropic-version", API_VERSION),),
)
"""A Messages request: the client's identity and betas passed on, a key in `x-api-key`, a
plan login's token as a bearer."""
_STREAM_ERRORS = {
    "overloaded_error": FailureClass.OVERLOADED,
    "rate_limit_error": FailureClass.RATE_LIMITED,
    "api_error": FailureClass.SERVER,
    "billing_error": FailureClass.BILLING,
}


class AnthropicMessagesAdapter:
    """Messages against an Anthropic-compatible base URL (without `/v1`)."""

    api = Api.ANTHROPIC_MESSAGES
    shape = ANTHROPIC_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """POST {base_url}/v1/messages, keeping the client's `?beta=true`."""
        path = "/v1/messages?beta=true" if "beta=true" in call.query else "/v1/messages"
        body, raw_body = call.body, call.raw_body
        if _UNSIGNED in raw_body or _UNSIGNED_SPACED in raw_body:
            body = _without_unsigned_thinking(body)
            raw_body = orjson.dumps(body)
        return self._request(call, path, with_model(body, raw_body, call.model))

    def count_tokens_request(self, call: UpstreamCall) -> UpstreamRequest | None:
        """POST {base_url}/v1/messages/count_tokens."""
        body = with_model(call.body, call.raw_body, call.model)
        return self._request(call, "/v1/messages/count_tokens", body)

    def _request(self, call: UpstreamCall, path: str, body: bytes) -> UpstreamRequest:
        request = self.shape.request(call, path, body)
        if call.connection.auth is Auth.OAUTH:
            # A plan login's token is accepted only with the OAuth beta flag, which is
            # added to the client's own flags rather than replacing them.
            headers = request.headers
            betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b]
            if OAUTH_BETA not in betas:
                betas.append(OAUTH_BETA)
            headers["anthropic-beta"] = ",".join(betas)
        return request

    def classify_failure(self, status: int, headers: Mapping[str, str], body: bytes) -> Failure:
        """Map an Anthropic error response (and its quota headers) to a failure class."""
        error = _error_object(body)
        message = str(error.get("message") or f"HTTP {status}")
        kind = str(error.get("type") or "")
        retry_after = retry_after_seconds(headers)

        def failure(cls: FailureClass, wait: float | None = None) -> Failure:
            return Failure(cls, message, status=status, retry_after_s=wait, body=body)

        if status == 429:
            details = error.get("details")
            if isinstance(details, dict) and details.get("error_code") == (
                "enforced_spend_limit_reached"
            ):
                return failure(FailureClass.BILLING)
            if headers.get("anthropic-ratelimit-unified-status") == "rejected":
                return failure(FailureClass.QUOTA_EXHAUSTED, retry_after)
            return failure(FailureClass.RATE_LIMITED, retry_after)
        if refuses_client(status, message):
            return failure(FailureClass.TERMS)
        if status == 402 or kind == "billing_error" or "credit balance" in message.lower():
            return failure(FailureClass.BILLING)
        if status in (401, 403):
            return failure(FailureClass.AUTH)
        if status == 404:
            return failure(FailureClass.MODEL_UNAVAILABLE)
        if status in (503, 529) or kind == "overloaded_error":
            return failure(FailureClass.OVERLOADED, retry_after)
        if status >= 500:
            return failure(FailureClass.SERVER, retry_after)
        if "prompt is too long" in message.lower():
            return failure(FailureClass.CONTEXT_TOO_LONG)
        return failure(FailureClass.BAD_REQUEST)

    def read_usage(self, response: dict[str, Any]) -> ReportedUsage:
        """Usage of a complete `message`."""
        return _usage(response.get("usage"), ReportedUsage())

    def read_quota(
        self, connection: Connection, *, model: str, headers: Mapping[str, str], now: float
    ) -> tuple[QuotaWindow, ...]:
        """Unified plan windows for a plan login; the API-key family for a key."""
        if connection.auth is Auth.OAUTH:
            return read_anthropic_unified(headers, model=model, now=now)
        return read_anthropic_api_key(headers, now=now)

    def read_overage(self, connection: Connection, headers: Mapping[str, str]) -> OverageReading:
        """A plan login's extra usage (A2.3); an API key bills every request anyway."""
        if connection.auth is Auth.OAUTH:
            return read_anthropic_overage(headers)
        return NO_OVERAGE

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """A plan login's OAuth usage endpoint (docs/provider-signals.md A2.5); keys have none."""
        if connection.auth is not Auth.OAUTH or connection.secret is None:
            return None
        headers = CredentialHeaders(
            connection, "Bearer", {"anthropic-beta": OAUTH_BETA, "accept": "application/json"}
        )
        return PollTarget(
            connection.id,
            f"{connection.base_url}/api/oauth/usage",
            headers,
            lambda body, now: read_claude_usage(body, now=now),
        )

    def watch_stream(self, *, strip_usage_chunk: bool) -> AnthropicMessagesWatcher:
        """A watcher for one Messages event stream."""
        return AnthropicMessagesWatcher()


class AnthropicMessagesWatcher:
    """Tracks one Messages stream: preamble, cumulative usage, in-stream errors."""

    __slots__ = ("_content_seen", "failure", "finished", "usage")

    def __init__(self) -> None:
        self._content_seen = False
        self.usage = ReportedUsage()
        self.failure: Failure | None = None
        self.finished = False

    def see(self, event: SseEvent) -> EventKind:
        """Classify one named event."""
        name = event.event
        if name == "message_start":
            message = orjson.loads(event.data).get("message") or {}
            self.usage = _usage(message.get("usage"), self.usage)
        elif name == "message_delta":
            # message_delta usage is cumulative: it replaces, never adds to, what came before.
            self.usage = _usage(orjson.loads(event.data).get("usage"), self.usage)
        elif name == "error":
            error = orjson.loads(event.data).get("error") or {}
            kind = _STREAM_ERRORS.get(str(error.get("type")), FailureClass.SERVER)
            self.failure = Failure(kind, str(error.get("message") or "upstream stream error"))
            return EventKind.ERROR
        elif name == "message_stop":
            self.finished = True
            return EventKind.CONTENT
        if not self._content_seen:
            if not visible.anthropic(name, event.data):
                return EventKind.PREAMBLE
            self._content_seen = True
        return EventKind.CONTENT


def _error_object(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error if isinstance(error, dict) else {}


def _usage(raw: object, previous: ReportedUsage) -> ReportedUsage:
    if not isinstance(raw, dict):
        return previous
    # A stream's usage is cumulative: a count it leaves out keeps its earlier value, and a
    # count that was once not a count leaves the whole reply's usage invalid.
    counts = CountReader(previous.invalid)
    pick = counts.read
    return ReportedUsage(
        input_tokens=pick(raw, "input_tokens", previous.input_tokens),
        output_tokens=pick(raw, "output_tokens", previous.output_tokens),
        cache_read_tokens=pick(raw, "cache_read_input_tokens", previous.cache_read_tokens),
        cache_write_tokens=pick(raw, "cache_creation_input_tokens", previous.cache_write_tokens),
        reasoning_tokens=previous.reasoning_tokens,
        invalid=counts.invalid,
    )


def _without_unsigned_thinking(body: dict[str, Any]) -> dict[str, Any]:
    # Thinking that another provider produced reached the client with an empty signature;
    # Anthropic would reject it, so it stays out of what is sent back.
    messages = [
        {
            **message,
            "content": [
                block
                for block in message["content"]
                if not (
                    isinstance(block, dict)
                    and block.get("type") == "thinking"
                    and not block.get("signature")
                )
            ],
        }
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        else message
        for message in body.get("messages", ())
    ]
    return {**body, "messages": messages}
