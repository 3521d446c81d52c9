"""Gemini Code Assist (`cloudcode-pa.googleapis.com/v1internal`), with a Gemini CLI login.

It serves the Gemini API's requests and replies inside an envelope (docs/provider-signals.md
A6.1): a request is `{"model", "project", "user_prompt_id", "request": {...}}` posted to
`{base}:generateContent` (or `:streamGenerateContent?alt=sse`), and each reply, whole or
one stream event at a time, is `{"response": {...}, "traceId"?}`. The engine speaks
`Api.GEMINI` to this adapter and unwraps replies through `unwrap_reply` and
`unwrap_event`. Errors are not wrapped.

The login's OAuth access token goes as a bearer. The project id is the login's, found once
by the credentials layer (`loadCodeAssist`, `onboardUser`) and read here from
`connection.project`. The plan's daily buckets come from `retrieveUserQuota`, a POST naming
the project, and from its 429s.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from rungway.adapters.base import Connection, CredentialHeaders, UpstreamCall, UpstreamRequest
from rungway.adapters.gemini.api import GOOGLE_SHAPE, GeminiAdapter, gemini_error_windows, wire_body
from rungway.adapters.shape import RequestShape
from rungway.protocol.sse import SseEvent
from rungway.quota import read_gemini_quota
from rungway.quota.poller import PollTarget
from rungway.routing.snapshot import QuotaWindow

CODE_ASSIST_SHAPE = RequestShape(forwarded=GOOGLE_SHAPE.forwarded)
"""A Google request whose credential, a login's token, goes as a bearer."""


class GeminiCodeAssistAdapter(GeminiAdapter):
    """The Gemini API through Code Assist's envelope, at a `.../v1internal` base URL."""

    shape = CODE_ASSIST_SHAPE

    def build_request(self, call: UpstreamCall) -> UpstreamRequest:
        """POST {base_url}:generateContent (or the streaming method), enveloped."""
        method = ":streamGenerateContent?alt=sse" if call.stream else ":generateContent"
        envelope = {
            "model": call.model,
            "project": _project(call.connection),
            "user_prompt_id": uuid.uuid4().hex,
            "request": wire_body(call.body),
        }
        return self.shape.request(call, method, orjson.dumps(envelope))

    def count_tokens_request(self, call: UpstreamCall) -> UpstreamRequest | None:
        """POST {base_url}:countTokens with `{"request": {"model", "contents"}}`."""
        body = call.body
        inner = body.get("generateContentRequest")
        contents = (inner if isinstance(inner, dict) else body).get("contents", [])
        payload = {"request": {"model": f"models/{call.model}", "contents": contents}}
        return self.shape.request(call, ":countTokens", orjson.dumps(payload))

    def unwrap_reply(self, reply: dict[str, Any]) -> dict[str, Any]:
        """The `GenerateContentResponse` inside `{"response": ..., "traceId": ...}`."""
        inner = reply.get("response")
        return inner if isinstance(inner, dict) else reply

    def unwrap_event(self, event: SseEvent) -> SseEvent:
        """One stream event's `response`, framed as the Gemini API frames it; an error
        event, which has no envelope, as it came."""
        if b'"response"' not in event.data:
            return event
        parsed = orjson.loads(event.data)
        inner = parsed.get("response") if isinstance(parsed, dict) else None
        if not isinstance(inner, dict):
            return event
        data = orjson.dumps(inner)
        return SseEvent(event.event, data, b"data: " + data + b"\r\n\r\n")

    def error_windows(
        self,
        connection: Connection,
        *,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        model: str,
        now: float,
    ) -> tuple[QuotaWindow, ...]:
        """The model's window a Code Assist 429 shows spent, until its reset (the plan's
        quotas are per model: `retrieveUserQuota` keeps a bucket per model)."""
        return gemini_error_windows(status, body, model=model, now=now)

    def usage_target(self, connection: Connection) -> PollTarget | None:
        """`POST {base}:retrieveUserQuota` with `{"project": ...}`, once the project is known."""
        project = connection.project
        if connection.credential() is None or project is None:
            return None

        def body() -> bytes | None:
            found = project.current()
            return None if found is None else orjson.dumps({"project": found})

        headers = CredentialHeaders(
            connection,
            "Bearer",
            {"accept": "application/json", "content-type": "application/json"},
        )
        return PollTarget(
            connection.id,
            f"{connection.usage_base_url or connection.base_url}:retrieveUserQuota",
            headers,
            lambda reply, now: read_gemini_quota(reply, now=now),
            body=body,
        )


def _project(connection: Connection) -> str | None:
    # The engine found the project before the attempt (`Connection.project`); without one
    # the upstream answers with its own error, which then says what is wrong.
    return connection.project.current() if connection.project is not None else None
