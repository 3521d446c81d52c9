"""Google's error shape, shared by the Gemini API and Gemini Code Assist upstreams.

Bodies are `{"error":{"code","message","status","details"?}}`, the `details` being
`google.rpc` messages (`ErrorInfo`, `RetryInfo`, `QuotaFailure`, `Help`); Code Assist
sometimes wraps the error in an array, `[{"error":{...}}]` (docs/provider-signals.md A6.2).
A 429 is a quota exhausted until a reset when the quota reader calls it terminal (a daily
quota, a Cloud Code `QUOTA_EXHAUSTED`, a wait past five minutes), otherwise a rate limit
with the wait the body names. An in-stream error is one SSE event holding the same object.

Status codes and their meaning: https://ai.google.dev/gemini-api/docs/troubleshooting
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from rungway.adapters.base import retry_after_seconds
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota import read_gemini_error

# ErrorInfo reasons that mean the credential, not the request, is at fault.
_AUTH_REASONS = frozenset(
    {"API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED", "ACCESS_TOKEN_EXPIRED", "VALIDATION_REQUIRED"}
)
_BILLING_REASONS = frozenset({"INSUFFICIENT_G1_CREDITS_BALANCE", "BILLING_DISABLED"})
# "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576)."
_TOO_LONG = ("exceeds the maximum number of tokens", "input token count")
# google.rpc.Code names, for an error whose HTTP status is not at hand (in a stream).
_STATUS_CODES = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def google_error(body: bytes) -> dict[str, Any]:
    """The `error` object of an error body, unwrapped from an array (empty when none)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return error_of(parsed)


def error_of(parsed: object) -> dict[str, Any]:
    """The `error` object of parsed JSON, unwrapped from an array (empty when none)."""
    if isinstance(parsed, list) and parsed:
        parsed = parsed[0]
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return error if isinstance(error, dict) else {}


def error_reason(error: Mapping[str, Any]) -> str:
    """The `ErrorInfo.reason` among an error's details ("" when it names none)."""
    details = error.get("details")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("ErrorInfo"):
            reason = detail.get("reason")
            return reason if isinstance(reason, str) else ""
    return ""


def classify_google_failure(status: int, headers: Mapping[str, str], body: bytes) -> Failure:
    """Map a Google API error response to a failure class."""
    error = google_error(body)
    message = str(error.get("message") or f"HTTP {status}")
    grpc = str(error.get("status") or "")
    reason = error_reason(error)

    def failure(cls: FailureClass, wait: float | None = None) -> Failure:
        return Failure(cls, message, status=status, retry_after_s=wait, body=body)

    if reason in _AUTH_REASONS or status == 401:
        return failure(FailureClass.AUTH)
    if reason in _BILLING_REASONS:
        return failure(FailureClass.BILLING)
    if status in (429, 499) or grpc == "RESOURCE_EXHAUSTED":
        # Only `terminal` and the wait are read; the windows are error_windows' business.
        signal = read_gemini_error(429, body, now=0.0)
        wait = signal.retry_after_s
        if wait is None:
            wait = retry_after_seconds(headers)
        if signal.terminal:
            return failure(FailureClass.QUOTA_EXHAUSTED, wait)
        return failure(FailureClass.RATE_LIMITED, wait)
    if status == 403:
        return failure(FailureClass.AUTH)
    if status == 404:
        return failure(FailureClass.MODEL_UNAVAILABLE)
    if status == 503:
        return failure(FailureClass.OVERLOADED, retry_after_seconds(headers))
    if status == 504:
        return failure(FailureClass.TIMEOUT)
    if status >= 500:
        return failure(FailureClass.SERVER, retry_after_seconds(headers))
    if any(marker in message.lower() for marker in _TOO_LONG):
        return failure(FailureClass.CONTEXT_TOO_LONG)
    if grpc == "FAILED_PRECONDITION":
        # "User location is not supported for the API use", or a free tier not offered
        # there: no other request to this connection would fare better.
        return failure(FailureClass.MODEL_UNAVAILABLE)
    return failure(FailureClass.BAD_REQUEST)


def stream_failure(data: bytes, error: Mapping[str, Any]) -> Failure:
    """The failure an in-stream `{"error": {...}}` event stands for."""
    code = error.get("code")
    status = code if isinstance(code, int) else _STATUS_CODES.get(str(error.get("status")), 500)
    failure = classify_google_failure(status, {}, data)
    if failure.kind is FailureClass.BAD_REQUEST:
        # A request the upstream took and began answering was not malformed.
        return Failure(FailureClass.SERVER, failure.message, status=status)
    return failure
