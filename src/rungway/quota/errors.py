"""Read what an error response says about quota: which window ran out, and until when.

A quota error marks its binding window rejected until the window's reset.
Each reader returns an `ErrorSignal`; `NO_SIGNAL` when the response says nothing about
quota. Readers never raise on a malformed body: an unreadable body is no signal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import orjson

from rungway.protocol import json_values
from rungway.quota.headers import codex_window_name, fold_headers, read_anthropic_unified
from rungway.quota.limits import LONGEST_THROTTLE_S, LimitKind, throttles
from rungway.quota.resets import parse_duration, parse_reset
from rungway.routing.snapshot import QuotaWindow, WindowStatus


@dataclass(frozen=True, slots=True)
class ErrorSignal:
    """An error response's quota evidence.

    `windows` are the windows the error shows exhausted (status rejected, source "error"),
    with their resets. `retry_after_s` is how long to wait before retrying, when the
    upstream says. `terminal` means retrying this request on this connection will not help
    soon: fail over now; the windows, if any, say when the connection is usable again.
    """

    windows: tuple[QuotaWindow, ...] = ()
    retry_after_s: float | None = None
    terminal: bool = False
    spent: LimitKind | None = None
    """The limit when the reader knows it outright (out of credits: `BUDGET`)."""

    @property
    def limit(self) -> LimitKind:
        """Which limit the error shows: what the reader named, else a spent window (a
        per-minute one is a throttle; a terminal error without one is a window whose reset
        it does not say), a wait alone a throttle, and nothing at all unexplained."""
        if self.spent is not None:
            return self.spent
        if self.windows:
            if all(throttles(window) for window in self.windows):
                return LimitKind.THROTTLE
            return LimitKind.WINDOW
        if self.terminal:
            return LimitKind.WINDOW
        return LimitKind.UNEXPLAINED if self.retry_after_s is None else LimitKind.THROTTLE


NO_SIGNAL = ErrorSignal()

# A6.2, rule 4 (the first-party Gemini CLI): a wait longer than five minutes is not a retry.
_LONGEST_RETRY_S = LONGEST_THROTTLE_S
# A6.2, rule 3: a Cloud Code `RATE_LIMIT_EXCEEDED` without a delay retries after 10 s;
# rule 5: a per-minute quota after 60 s.
_RATE_LIMIT_DEFAULT_S = 10.0
_PER_MINUTE_DEFAULT_S = 60.0
_GEMINI_RETRY_IN = re.compile(r"please retry in ([0-9.]+(?:ms|s))", re.IGNORECASE)
# A6.2: "Your quota will reset after 373s." or "... after 1h2m3s".
_GEMINI_RESET_AFTER = re.compile(r"reset after ((?:\d+(?:\.\d+)?(?:h|ms|m|s))+)", re.IGNORECASE)
# A3: the first-party Codex client reads the wait from "Please try again in 6.2s".
_TRY_AGAIN_IN = re.compile(r"try again in\s*(\d+(?:\.\d+)?)\s*(ms|s|seconds?)\b", re.IGNORECASE)
# Gemini's daily request quotas reset at midnight Pacific time, not UTC; Google's Gemini API
# rate-limits page states it ("Requests per day (RPD) quotas reset at midnight Pacific
# time", https://ai.google.dev/gemini-api/docs/rate-limits). The error body gives no instant.
_GEMINI_DAY_ZONE = "America/Los_Angeles"


_CLIENT_REFUSALS = ("only authorized for use with claude code",)
"""What a plan's refusal of another client says, lower-cased (provider-signals A2.6)."""


def refuses_client(status: int, message: str) -> bool:
    """True when an error answers that this plan login does not serve the request's
    client: Anthropic's 400 "This credential is only authorized for use with Claude Code"
    (provider-signals A2.6). It is the client, not the connection, that cannot be served:
    the login stays usable for the clients its terms allow."""
    if status not in (400, 401, 403):
        return False
    lowered = message.lower()
    return any(refusal in lowered for refusal in _CLIENT_REFUSALS)


def read_codex_error(status: int, body: bytes, *, now: float) -> ErrorSignal:
    """A ChatGPT plan error from the Codex backend (docs/provider-signals.md A4.5)."""
    if status != 429:
        return NO_SIGNAL
    error = _error_object(_json(body))
    kind = _text(error.get("type")) or _text(error.get("code"))
    if kind == "usage_not_included":
        # The plan does not cover this request or model: no wait will change that (A4.5).
        return ErrorSignal(terminal=True)
    if kind == "usage_limit_reached":
        # `resets_at` is epoch seconds (A4.5); `resets_in_seconds` a delta (A9).
        reset = parse_reset(_text(error.get("resets_at")), now=now)
        if reset is None:
            reset = parse_reset(_text(error.get("resets_in_seconds")), now=now, relative=True)
        window = _rejected_window(_codex_error_window(error), reset, now=now)
        retry = None if reset is None else reset - now
        # The first-party Codex client does not retry plan exhaustion (A4.5).
        return ErrorSignal((window,), retry, terminal=True)
    # Any other 429 is a transient rate limit (A4.5).
    return ErrorSignal(retry_after_s=_try_again_in(_text(error.get("message"))))


def _codex_error_window(error: Mapping[str, Any]) -> str:
    minutes = _number(error.get("window_minutes"))
    if minutes is None:
        seconds = _number(error.get("limit_window_seconds"))
        # A4.4: seconds become minutes rounded up, as the first-party Codex client does.
        minutes = None if seconds is None else math.ceil(seconds / 60)
    return codex_window_name(int(minutes)) if minutes else "usage"


def read_gemini_error(status: int, body: bytes, *, now: float) -> ErrorSignal:
    """A Gemini (API key or Code Assist) quota error from its `google.rpc` details (A6.2)."""
    if status not in (429, 499):
        return NO_SIGNAL
    error = _error_object(_json(body))
    details = [d for d in json_values.array(error.get("details")) if isinstance(d, dict)]
    info = _detail(details, "ErrorInfo")
    metadata = json_values.mapping(info.get("metadata"))
    reason = _text(info.get("reason"))
    violations = [
        v for v in json_values.array(_detail(details, "QuotaFailure").get("violations")) if v
    ]
    quota_ids = [_text(json_values.mapping(v).get("quotaId")) for v in violations]
    quota_ids.append(_text(metadata.get("quota_limit")))
    delay = _gemini_delay(details, metadata, _text(error.get("message")))

    if any("PerDay" in q or "Daily" in q for q in quota_ids):
        # Rule 1: daily exhaustion is terminal even when RetryInfo is short (section 0, 7).
        reset = _next_midnight_pacific(now)
        models = {
            _text(json_values.mapping(json_values.mapping(v).get("quotaDimensions")).get("model"))
            for v in violations
        }
        windows = tuple(
            _rejected_window("1d", reset, now=now, model=m or None) for m in sorted(models)
        )
        return ErrorSignal(windows or (_rejected_window("1d", reset, now=now),), delay, True)
    if reason == "INSUFFICIENT_G1_CREDITS_BALANCE":
        return ErrorSignal(retry_after_s=delay, terminal=True, spent=LimitKind.BUDGET)
    if reason == "QUOTA_EXHAUSTED":
        return _terminal_after(delay, now=now)
    if reason == "RATE_LIMIT_EXCEEDED" and delay is None:
        return ErrorSignal(retry_after_s=_RATE_LIMIT_DEFAULT_S)
    if delay is not None:
        return (
            _terminal_after(delay, now=now)
            if delay > _LONGEST_RETRY_S
            else ErrorSignal(retry_after_s=delay)
        )
    if any("PerMinute" in q for q in quota_ids):
        return ErrorSignal(retry_after_s=_PER_MINUTE_DEFAULT_S)
    # Rule 7: any other 429, including a bare body without details, is retryable.
    return ErrorSignal()


def read_gemini_minute_window(status: int, body: bytes, *, now: float) -> QuotaWindow | None:
    """The per-minute window a Gemini 429 shows spent, until its retry delay has passed.

    `read_gemini_error` treats a per-minute quota as a retry (A6.2, rule 5); the window
    lets the ladder step past that model for the rest of the minute instead of sending it
    requests that the quota would refuse. None when the error names no per-minute quota.
    """
    if status != 429:
        return None
    error = _error_object(_json(body))
    details = [d for d in json_values.array(error.get("details")) if isinstance(d, dict)]
    violations = [
        json_values.mapping(v)
        for v in json_values.array(_detail(details, "QuotaFailure").get("violations"))
    ]
    minute = [v for v in violations if "PerMinute" in _text(v.get("quotaId"))]
    if not minute:
        return None
    metadata = json_values.mapping(_detail(details, "ErrorInfo").get("metadata"))
    delay = _gemini_delay(details, metadata, _text(error.get("message")))
    wait = _PER_MINUTE_DEFAULT_S if delay is None else min(delay, _LONGEST_RETRY_S)
    model = _text(json_values.mapping(minute[0].get("quotaDimensions")).get("model"))
    return _rejected_window("1m", now + wait, now=now, model=model or None)


def _gemini_delay(
    details: list[dict[str, Any]], metadata: Mapping[str, Any], message: str
) -> float | None:
    # Preference: RetryInfo (A6.2), then ErrorInfo `quotaResetDelay` and the message text,
    # the two fallbacks a third-party gateway added.
    candidates = [
        _text(_detail(details, "RetryInfo").get("retryDelay")),
        _text(metadata.get("quotaResetDelay")),
    ]
    for pattern in (_GEMINI_RETRY_IN, _GEMINI_RESET_AFTER):
        match = pattern.search(message)
        if match is not None:
            candidates.append(match[1])
    for candidate in candidates:
        delay = parse_duration(candidate)
        if delay is not None:
            return delay
    return None


def _terminal_after(delay: float | None, *, now: float) -> ErrorSignal:
    # A terminal quota error with a known wait names when the quota returns.
    if delay is None:
        return ErrorSignal(terminal=True)
    return ErrorSignal((_rejected_window("quota", now + delay, now=now),), delay, terminal=True)


def _next_midnight_pacific(now: float) -> float:
    zone = ZoneInfo(_GEMINI_DAY_ZONE)
    today = datetime.fromtimestamp(now, zone).date()
    # Midnight is never inside a Pacific DST gap (changes happen at 02:00), so it exists.
    return datetime.combine(today + timedelta(days=1), time(0), tzinfo=zone).timestamp()


def read_openrouter_error(
    status: int, headers: Mapping[str, str], body: bytes, *, now: float
) -> ErrorSignal:
    """An OpenRouter 402 (credits) or 429 (rate limit) error (docs/provider-signals.md A7)."""
    folded = fold_headers(headers)
    retry = _retry_after(folded, now=now)
    if status == 402:
        # A 402 is out of credits, even on `:free` models with a negative balance; only one
        # caused by the in-flight budget, with `Retry-After`, is worth waiting for (A7).
        metadata = json_values.mapping(_error_object(_json(body)).get("metadata"))
        if retry is not None and metadata.get("limit_source") == "openrouter_in_flight_budget":
            return ErrorSignal(retry_after_s=retry)
        return ErrorSignal(terminal=True, spent=LimitKind.BUDGET)
    if status == 429:
        return ErrorSignal(_openrouter_window(folded, now=now), retry)
    if status == 503:
        return ErrorSignal(retry_after_s=retry)
    return NO_SIGNAL


def _openrouter_window(folded: Mapping[str, str], *, now: float) -> tuple[QuotaWindow, ...]:
    limit = _number(folded.get("x-ratelimit-limit"))
    remaining = _number(folded.get("x-ratelimit-remaining"))
    reset_value = folded.get("x-ratelimit-reset")
    if limit is None and remaining is None and reset_value is None:
        return ()
    # A7 leaves the reset unit unverified: `parse_reset` reads epoch milliseconds (>= 1e12),
    # epoch seconds, or a small delta, per A9 step 2.
    reset = None if reset_value is None else parse_reset(reset_value, now=now)
    used = 100.0
    if limit is not None and remaining is not None and limit > 0:
        used = min(100.0, max(0.0, 100.0 * (1.0 - remaining / limit)))
    return (_rejected_window("requests", reset, now=now, used=used),)


def read_anthropic_unified_error(
    status: int, headers: Mapping[str, str], *, model: str, now: float
) -> ErrorSignal:
    """A Claude plan 429: the unified windows it rejects and its `retry-after` (A2.3, A2.4)."""
    if status != 429:
        return NO_SIGNAL
    folded = fold_headers(headers)
    windows = _as_errors(read_anthropic_unified(folded, model=model, now=now))
    # A 429 without a rejected unified window is not plan exhaustion (A2.2 (a)): a rate limit
    # or a request the server refused, so only its wait hint is kept.
    return ErrorSignal(windows, _retry_after(folded, now=now), terminal=bool(windows))


def _as_errors(windows: Iterable[QuotaWindow]) -> tuple[QuotaWindow, ...]:
    return tuple(
        replace(window, source="error")
        for window in windows
        if window.status is WindowStatus.REJECTED
    )


def _rejected_window(
    name: str, reset: float | None, *, now: float, model: str | None = None, used: float = 100.0
) -> QuotaWindow:
    return QuotaWindow(
        name=name,
        used_percent=used,
        resets_at=reset,
        checked_at=now,
        model=model,
        status=WindowStatus.REJECTED,
        source="error",
    )


def _retry_after(folded: Mapping[str, str], *, now: float) -> float | None:
    # `Retry-After` is delta seconds or an HTTP-date (RFC 9110; A9).
    value = folded.get("retry-after")
    instant = None if value is None else parse_reset(value, now=now, relative=True)
    return None if instant is None else instant - now


def _try_again_in(message: str) -> float | None:
    match = _TRY_AGAIN_IN.search(message)
    if match is None:
        return None
    amount = float(match[1])
    return amount / 1000.0 if match[2].lower() == "ms" else amount


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _error_object(payload: Any) -> dict[str, Any]:
    # Code Assist and Vertex sometimes wrap the error in an array, `[{"error": {...}}]` (A6.2).
    if isinstance(payload, list) and payload:
        payload = payload[0]
    return json_values.mapping(json_values.mapping(payload).get("error"))


def _detail(details: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    suffix = f"google.rpc.{kind}"
    for detail in details:
        if _text(detail.get("@type")).endswith(suffix):
            return detail
    return {}


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float):
        return repr(value)
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
