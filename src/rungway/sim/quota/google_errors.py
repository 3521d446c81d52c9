"""Google's error bodies as the simulated Gemini API, Gemini Code Assist and Antigravity
send them.

Every error is `{"error":{"code","message","status","details"?}}` (docs/provider-signals.md
A6.2), `details` holding `google.rpc` messages. A spent free-tier window is a 429
`RESOURCE_EXHAUSTED`: on the Gemini API with `Help`, `QuotaFailure` and `RetryInfo`; on
Code Assist with the Cloud Code `ErrorInfo` (`QUOTA_EXHAUSTED` for a daily quota,
`RATE_LIMIT_EXCEEDED` for a per-minute one) and `RetryInfo`. Google sends no quota headers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import orjson

from rungway.sim.exchange import Header, Reply
from rungway.sim.quota.windows import Admission, WindowReading, go_duration, rfc3339

RPC = "type.googleapis.com/google.rpc."
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
DEFAULT_MESSAGES = {
    400: "Request contains an invalid argument.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
API_KEY_INVALID_MESSAGE = "API key not valid. Please pass a valid API key."
UNREGISTERED_MESSAGE = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)
UNAUTHENTICATED_MESSAGE = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project."
)
RATE_LIMITS_URL = "https://ai.google.dev/gemini-api/docs/rate-limits"
CLOUD_CODE_DOMAIN = "cloudcode-pa.googleapis.com"
_FREE_TIER_REQUESTS = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
_FREE_TIER_TOKENS = "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"


def error_body(
    code: int, message: str | None = None, status: str | None = None, details: Sequence[Any] = ()
) -> dict[str, Any]:
    """The `{"error": {...}}` object (an in-stream error is this object as an SSE event)."""
    error: dict[str, Any] = {
        "code": code,
        "message": message or DEFAULT_MESSAGES.get(code, STATUS_NAMES.get(code, "Error")),
        "status": status or STATUS_NAMES.get(code, "UNKNOWN"),
    }
    if details:
        error["details"] = list(details)
    return {"error": error}


def error_reply(
    code: int,
    message: str | None = None,
    status: str | None = None,
    details: Sequence[Any] = (),
    headers: tuple[Header, ...] = (),
) -> Reply:
    """A Google error response."""
    return Reply(code, orjson.dumps(error_body(code, message, status, details)), headers)


def invalid_argument(message: str, *, violation: bool = False, field: str | None = None) -> Reply:
    """400 `INVALID_ARGUMENT`; with `violation` the message is also a `BadRequest` field
    violation (naming `field` when given), as the real API sends for a malformed payload."""
    details: list[Any] = []
    if violation:
        entry = (
            {"description": message} if field is None else {"field": field, "description": message}
        )
        details.append({"@type": RPC + "BadRequest", "fieldViolations": [entry]})
    return error_reply(400, message, details=details)


def api_key_invalid() -> Reply:
    """The Gemini API's answer to a wrong key: 400 `API_KEY_INVALID`, not a 401."""
    info = {
        "@type": RPC + "ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }
    localized = {"@type": RPC + "LocalizedMessage", "locale": "en-US"}
    localized["message"] = API_KEY_INVALID_MESSAGE
    return error_reply(400, API_KEY_INVALID_MESSAGE, details=[info, localized])


def unregistered_caller() -> Reply:
    """The Gemini API's answer to a request without any key: 403 `PERMISSION_DENIED`."""
    info = {
        "@type": RPC + "ErrorInfo",
        "reason": "CONSUMER_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }
    return error_reply(403, UNREGISTERED_MESSAGE, details=[info])


def unauthenticated(sent: str | None = None) -> Reply:
    """Code Assist's 401 for a missing, wrong or expired access token."""
    reason = "CREDENTIALS_MISSING" if sent is None else "ACCESS_TOKEN_TYPE_UNSUPPORTED"
    info = {
        "@type": RPC + "ErrorInfo",
        "reason": reason,
        "domain": "googleapis.com",
        "metadata": {"service": CLOUD_CODE_DOMAIN},
    }
    return error_reply(401, UNAUTHENTICATED_MESSAGE, details=[info])


def project_denied(project: str | None) -> Reply:
    """Code Assist's 403 for a request naming no project, or one the login cannot use."""
    permission = "cloudaicompanion.companions.generateChat"
    resource = f"projects/{project or ''}/locations/global"
    message = (
        f"Permission '{permission}' denied on resource "
        f"'//cloudaicompanion.googleapis.com/{resource}' (or it may not exist)."
    )
    info = {
        "@type": RPC + "ErrorInfo",
        "reason": "IAM_PERMISSION_DENIED",
        "domain": "cloudaicompanion.googleapis.com",
        "metadata": {"permission": permission, "resource": resource},
    }
    return error_reply(403, message, details=[info])


def retry_info(seconds: float) -> dict[str, Any]:
    """`RetryInfo` with a protobuf Duration (`"38s"`)."""
    return {"@type": RPC + "RetryInfo", "retryDelay": f"{max(1, math.ceil(seconds))}s"}


def _is_daily(reading: WindowReading) -> bool:
    return reading.spec.reset_zone is not None or reading.spec.length_s >= 86400


def _binding(admission: Admission) -> WindowReading | None:
    # The window the request has to wait longest for.
    rejected = admission.rejected
    return max(rejected, key=lambda reading: reading.reset_at) if rejected else None


def _violation(reading: WindowReading, model: str) -> dict[str, Any]:
    spec = reading.spec
    if spec.unit != "requests":
        quota_id = "GenerateContentInputTokensPerModelPerMinute-FreeTier"
        metric = _FREE_TIER_TOKENS
    elif _is_daily(reading):
        quota_id = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
        metric = _FREE_TIER_REQUESTS
    else:
        quota_id = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
        metric = _FREE_TIER_REQUESTS
    return {
        "quotaMetric": metric,
        "quotaId": quota_id,
        "quotaDimensions": {"location": "global", "model": spec.model or model},
        "quotaValue": str(spec.capacity),
    }


def gemini_quota_exceeded(model: str, admission: Admission) -> Reply:
    """The Gemini API's free-tier 429: `Help`, `QuotaFailure` and `RetryInfo` (A6.2)."""
    wait = admission.retry_after_s()
    violations = [_violation(reading, model) for reading in admission.rejected]
    lines = [
        f"* Quota exceeded for metric: {v['quotaMetric']}, limit: {v['quotaValue']}, "
        f"model: {v['quotaDimensions']['model']}"
        for v in violations
    ]
    message = (
        "You exceeded your current quota, please check your plan and billing details. For "
        f"more information on this error, head to: {RATE_LIMITS_URL}. To monitor your "
        "current usage, head to: https://ai.dev/usage?tab=rate-limit. \n"
        + "\n".join(lines)
        + f"\nPlease retry in {wait}s."
    )
    links = [{"description": "Learn more about Gemini API quotas", "url": RATE_LIMITS_URL}]
    details = [
        {"@type": RPC + "Help", "links": links},
        {"@type": RPC + "QuotaFailure", "violations": violations},
        retry_info(wait),
    ]
    return error_reply(429, message, details=details)


def code_assist_quota_exceeded(model: str, admission: Admission) -> Reply:
    """Code Assist's 429: the Cloud Code `ErrorInfo` and `RetryInfo` (A6.2).

    A spent daily quota is `QUOTA_EXHAUSTED`, a per-minute one `RATE_LIMIT_EXCEEDED`; the
    metadata's `quotaResetDelay` and the message say how long until the reset.
    """
    binding = _binding(admission)
    wait = admission.retry_after_s()
    daily = binding is not None and _is_daily(binding)
    delay = go_duration(wait)
    if daily:
        reason = "QUOTA_EXHAUSTED"
        message = (
            f"You have exhausted your capacity on this model. Your quota will reset after {delay}."
        )
    else:
        reason = "RATE_LIMIT_EXCEEDED"
        message = f"Resource has been exhausted (e.g. check quota). Please retry in {wait}s."
    metadata = {
        "model": model,
        "quotaResetDelay": delay,
        "quotaResetTimeStamp": rfc3339(admission.now + wait),
    }
    info = {
        "@type": RPC + "ErrorInfo",
        "reason": reason,
        "domain": CLOUD_CODE_DOMAIN,
        "metadata": metadata,
    }
    return error_reply(429, message, details=[info, retry_info(wait)])


ANTIGRAVITY_CLIENTS_ONLY = (
    "This Antigravity sign-in may be used only from Google's Antigravity clients "
    "(Antigravity Additional Terms, section 6)."
)
"""The simulated refusal of another client. Google's own wording is not known: its terms
forbid other clients and it has suspended accounts that used them; the shape is Google's
`PERMISSION_DENIED`, the reason names what is refused."""
UNSUPPORTED_CLIENT = "UNSUPPORTED_CLIENT"


def client_refused() -> Reply:
    """Antigravity's 403 for a request that does not come from an Antigravity client."""
    info = {
        "@type": RPC + "ErrorInfo",
        "reason": UNSUPPORTED_CLIENT,
        "domain": CLOUD_CODE_DOMAIN,
        "metadata": {"service": CLOUD_CODE_DOMAIN},
    }
    return error_reply(403, ANTIGRAVITY_CLIENTS_ONLY, details=[info])


def antigravity_quota_exceeded(model: str, spent: Sequence[WindowReading], now: float) -> Reply:
    """Antigravity's 429 for a model whose bucket is spent: `QUOTA_EXHAUSTED` for a bucket
    of an hour or more, `RATE_LIMIT_EXCEEDED` for a shorter throttle, with the delay in
    `ErrorInfo.metadata` and `RetryInfo`, as Cloud Code sends them to Antigravity."""
    binding = max(spent, key=lambda reading: reading.reset_at)
    wait = max(0.001, binding.reset_at - now)
    delay = go_duration(wait)
    quota = binding.spec.length_s >= 3600 or binding.spec.reset_zone is not None
    reason = "QUOTA_EXHAUSTED" if quota else "RATE_LIMIT_EXCEEDED"
    message = (
        f"You have exhausted your capacity on this model. Your quota will reset after {delay}."
    )
    metadata = {
        "model": model,
        "quotaResetDelay": delay,
        "quotaResetTimeStamp": rfc3339(now + wait),
        "uiMessage": "true",
    }
    info = {"@type": RPC + "ErrorInfo", "reason": reason, "domain": CLOUD_CODE_DOMAIN}
    retry = {"@type": RPC + "RetryInfo", "retryDelay": f"{wait:.9g}s"}
    return error_reply(429, message, details=[{**info, "metadata": metadata}, retry])


def credits_spent(model: str) -> Reply:
    """Antigravity's 429 for a request that asked to spend AI credits the login lacks."""
    info = {
        "@type": RPC + "ErrorInfo",
        "reason": "INSUFFICIENT_G1_CREDITS_BALANCE",
        "domain": CLOUD_CODE_DOMAIN,
        "metadata": {"model": model},
    }
    return error_reply(429, "Insufficient Google One AI credits balance.", details=[info])
