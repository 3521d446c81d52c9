"""OpenAI Chat Completions: request checks, error bodies, stream events and model lists."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from rungway.protocol.failures import FailureClass

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


def check_request(body: dict[str, Any]) -> str | None:
    """Return what is wrong with a chat request's shape, or None when it can be routed."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return "`model` is required and must be a non-empty string"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "`messages` is required and must be a non-empty array of message objects"
    if not all(isinstance(message, dict) for message in messages):
        return "every item of `messages` must be an object with `role` and `content`"
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        return "`stream` must be a boolean"
    return None


def error_body(status: int, message: str, code: str | None = None) -> bytes:
    """An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


def stream_error_event(message: str, kind: FailureClass | None = None) -> bytes:
    """An error delivered inside a 200 stream, as OpenAI sends it, followed by `[DONE]`."""
    code = kind.value if kind is not None else "upstream_error"
    payload = {"error": {"message": message, "type": "server_error", "param": None, "code": code}}
    return b"data: " + orjson.dumps(payload) + b"\n\ndata: [DONE]\n\n"


def model_list(models: Iterable[tuple[str, str]]) -> bytes:
    """`GET /v1/models` in OpenAI's shape; `models` holds (id, owner) pairs."""
    data = [
        {"id": model, "object": "model", "created": 0, "owned_by": owner} for model, owner in models
    ]
    return orjson.dumps({"object": "list", "data": data})
