"""Anthropic Messages: request checks, error bodies, stream events and model lists."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from rungway.protocol.failures import FailureClass

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
"""Anthropic's `error.type` for each HTTP status it uses."""

_STREAM_ERROR_TYPES = {
    FailureClass.OVERLOADED: "overloaded_error",
    FailureClass.RATE_LIMITED: "rate_limit_error",
    FailureClass.QUOTA_EXHAUSTED: "rate_limit_error",
    FailureClass.TIMEOUT: "api_error",
}


def check_request(body: dict[str, Any], *, count_tokens: bool = False) -> str | None:
    """Return what is wrong with a Messages request's shape, or None when it can be routed."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return "model: Field required (a non-empty string)"
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages: Field required (an array of message objects)"
    if not all(isinstance(message, dict) for message in messages):
        return "messages: every item must be an object with `role` and `content`"
    if count_tokens:
        return None
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        return "max_tokens: Field required (a positive integer)"
    if max_tokens < 1:
        return "max_tokens: must be at least 1"
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        return "stream: must be a boolean"
    return None


def error_body(
    status: int, message: str, code: str | None = None, request_id: str | None = None
) -> bytes:
    """An error in Anthropic's shape: `{"type": "error", "error": {"type", "message"}}`.

    The gateway's own `code` (such as `subscription_unavailable`) rides along in `error`,
    where clients that know it can read it and the rest ignore it.
    """
    kind = ERROR_TYPES.get(status, "api_error")
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    payload: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        payload["request_id"] = request_id
    return orjson.dumps(payload)


def stream_error_event(message: str, kind: FailureClass | None = None) -> bytes:
    """An `event: error` frame, as Anthropic sends one inside a 200 stream."""
    error_type = _STREAM_ERROR_TYPES.get(kind, "api_error") if kind else "api_error"
    payload = {"type": "error", "error": {"type": error_type, "message": message}}
    return b"event: error\ndata: " + orjson.dumps(payload) + b"\n\n"


def model_list(models: Iterable[tuple[str, str]]) -> bytes:
    """`GET /v1/models` in Anthropic's shape; `models` holds (id, display name) pairs."""
    data = [
        {"type": "model", "id": model, "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
        for model, name in models
    ]
    return orjson.dumps(
        {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    )
