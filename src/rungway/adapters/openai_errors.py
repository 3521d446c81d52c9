"""OpenAI's error shape, shared by the Chat Completions and Responses upstream families.

Bodies are `{"error":{"message","type","param","code"}}` (provider-signals.md A3); some
OpenAI-compatible vendors wrap it in an array or send a bare string, and the ChatGPT
backend answers malformed requests with `{"detail": "..."}` (A4.2). `insufficient_quota`
(and `credit_balance_exhausted`) come as HTTP 429 but are billing failures, not rate
limits: classify on `type` as well as `code`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from rungway.adapters.base import retry_after_seconds
from rungway.protocol.failures import Failure, FailureClass

BILLING_CODES = frozenset({"insufficient_quota", "credit_balance_exhausted", "billing_not_active"})
CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_TRY_AGAIN = re.compile(r"(?i)try again in\s*(\d+(?:\.\d+)?)\s*(ms|s|seconds?)")


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
