"""OpenAI's error shape, shared by the Chat Completions and Responses upstream families.

Bodies are `{"error":{"message","type","param","code"}}` (docs/provider-signals.md A3); some
OpenAI-compatible vendors wrap it in an array or send a bare string, and the ChatGPT
backend answers malformed requests with `{"detail": "..."}` (A4.2). `insufficient_quota`
(and `credit_balance_exhausted`) come as HTTP 429 but are billing failures, not rate
limits: classify on `type` as well as `code`.

A base URL without its version path (`https://api.openai.com` for
`https://api.openai.com/v1`) reaches the server but not the API: OpenAI answers 404
"Invalid URL (POST /chat/completions)", other servers a bare 404. `version_path_hint`
turns that into the correction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from rungway.adapters.base import retry_after_seconds
from rungway.protocol.failures import Failure, FailureClass

BILLING_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted", "billing_not_active"})
CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_TRY_AGAIN = re.compile(r"(?i)try again in\s*(\d+(?:\.\d+)?)\s*(ms|s|seconds?)")
# `v1`, `v4`, `v1beta`: the segment naming an API version (OpenAI `/v1`, Groq
# `/openai/v1`, Gemini's `/v1beta/openai`).
_VERSION_SEGMENT = re.compile(r"v\d+(?:[a-z]+\d*)?")


def error_object(body: bytes) -> dict[str, Any]:
    """The `error` object of an error body (empty when there is none to read)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    if isinstance(parsed, list) and parsed:
        parsed = parsed[0]
    if not isinstance(parsed, dict):
        return {}
    error = parsed.get("error")
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        return {"message": error}
    detail = parsed.get("detail")
    return {"message": detail} if isinstance(detail, str) else {}


def wait_in_message(message: str) -> float | None:
    """The wait an OpenAI 429 message names ("Please try again in 644ms"), in seconds."""
    match = _TRY_AGAIN.search(message)
    if match is None:
        return None
    value = float(match.group(1))
    return value / 1000 if match.group(2) == "ms" else value


def classify_openai_failure(status: int, headers: Mapping[str, str], body: bytes) -> Failure:
    """Map an OpenAI-shaped error response to a failure class."""
    error = error_object(body)
    message = str(error.get("message") or f"HTTP {status}")
    code = str(error.get("code") or "")
    kind = str(error.get("type") or "")
    retry_after = retry_after_seconds(headers)

    def failure(cls: FailureClass, wait: float | None = None) -> Failure:
        return Failure(cls, message, status=status, retry_after_s=wait, body=body)

    if code in BILLING_CODES or kind in BILLING_CODES or status == 402:
        return failure(FailureClass.BILLING)
    if status == 429:
        return failure(FailureClass.RATE_LIMITED, retry_after or wait_in_message(message))
    if code in CONTEXT_CODES:
        return failure(FailureClass.CONTEXT_TOO_LONG)
    if status in (401, 403):
        return failure(FailureClass.AUTH)
    # The Responses API answers an unknown model 400 `model_not_found`, Chat 404.
    if status == 404 or code == "model_not_found":
        return failure(FailureClass.MODEL_UNAVAILABLE)
    if status == 408:
        return failure(FailureClass.TIMEOUT)
    if status in (503, 529):
        return failure(FailureClass.OVERLOADED, retry_after)
    if status >= 500:
        return failure(FailureClass.SERVER, retry_after)
    return failure(FailureClass.BAD_REQUEST)


def has_version_path(base_url: str) -> bool:
    """True when a segment of the URL's path names an API version (`/v1`, `/v1beta`)."""
    segments = urlsplit(base_url).path.split("/")
    return any(_VERSION_SEGMENT.fullmatch(segment) for segment in segments)


def version_path_hint(base_url: str, status: int, body: bytes) -> str | None:
    """The "did you mean {base_url}/v1?" for a 404 from a base URL without a version path."""
    if status != 404 or has_version_path(base_url):
        return None
    # An unknown model is the API itself answering: the base URL is right.
    if error_object(body).get("code") == "model_not_found":
        return None
    return f"did you mean {base_url.rstrip('/')}/v1?"
