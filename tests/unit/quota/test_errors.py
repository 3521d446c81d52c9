"""Quota evidence read from recorded error responses: rejected windows, waits, finality."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from rungway.quota import (
    NO_SIGNAL,
    ErrorSignal,
    read_anthropic_unified_error,
    read_codex_error,
    read_gemini_error,
    read_openrouter_error,
)

from .recorded import assert_windows, body_of, recorded

NOW = 1_790_000_000.0
PACIFIC = ZoneInfo("America/Los_Angeles")

Reader = Callable[[dict[str, Any]], ErrorSignal]
READERS: dict[str, Reader] = {
    "codex_error": lambda c: read_codex_error(c["status"], body_of(c), now=c["now"]),
    "gemini_error": lambda c: read_gemini_error(c["status"], body_of(c), now=c["now"]),
    "openrouter_error": lambda c: read_openrouter_error(
        c["status"], c["headers"], body_of(c), now=c["now"]
    ),
    "anthropic_unified_error": lambda c: read_anthropic_unified_error(
        c["status"], c["headers"], model=c["model"], now=c["now"]
    ),
}


@pytest.mark.parametrize(
    "case",
    recorded(
        "anthropic/quota_errors.json",
        "codex/errors.json",
        "gemini/errors.json",
        "openrouter/errors.json",
    ),
)
def test_recorded_errors_read_as_golden_signals(case: dict[str, Any]) -> None:
    signal = READERS[case["reader"]](case)
    assert_windows(signal.windows, case["windows"], now=case["now"], source="error")
    if case["retry_after_s"] is None:
        assert signal.retry_after_s is None
    else:
        assert signal.retry_after_s == pytest.approx(case["retry_after_s"], abs=1e-6)
    assert signal.terminal is case["terminal"]


# --- Gemini's daily reset ---------------------------------------------------------------------


def daily_error(model: str = "gemini-2.5-flash") -> bytes:
    violation = {
        "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        "quotaDimensions": {"location": "global", "model": model},
    }
    detail = {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]}
    return json.dumps({"error": {"code": 429, "message": "Quota", "details": [detail]}}).encode()


def pacific(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=PACIFIC).timestamp()


@pytest.mark.parametrize(
    ("now", "midnight"),
    [
        # Just after midnight Pacific: the whole day is ahead.
        (pacific(2026, 9, 21, 0, 1), pacific(2026, 9, 22)),
        # Exactly at midnight: the next one, not now.
        (pacific(2026, 9, 22), pacific(2026, 9, 23)),
        # 23:30 UTC is still the afternoon in California.
        (datetime.fromisoformat("2026-09-21T23:30:00+00:00").timestamp(), pacific(2026, 9, 22)),
        # The spring-forward day has 23 hours.
        (pacific(2026, 3, 8, 1, 0), pacific(2026, 3, 9)),
        # The fall-back day has 25 hours.
        (pacific(2026, 11, 1, 0, 30), pacific(2026, 11, 2)),
    ],
)
def test_gemini_daily_quota_resets_at_the_next_pacific_midnight(
    now: float, midnight: float
) -> None:
    signal = read_gemini_error(429, daily_error(), now=now)
    (window,) = signal.windows
    assert window.resets_at == midnight
    assert signal.terminal


def test_gemini_daily_violations_for_two_models_reject_each_model() -> None:
    payload = json.loads(daily_error("gemini-2.5-flash"))
    payload["error"]["details"][0]["violations"].append(
        {"quotaId": "GenerateRequestsPerDayPerProjectPerModel", "quotaDimensions": {"model": "x"}}
    )
    signal = read_gemini_error(429, json.dumps(payload).encode(), now=NOW)
    assert [w.model for w in signal.windows] == ["gemini-2.5-flash", "x"]


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b"null", b'{"error": "busy"}'])
def test_gemini_unreadable_429_is_retryable_without_a_hint(body: bytes) -> None:
    assert read_gemini_error(429, body, now=NOW) == ErrorSignal()


def test_gemini_per_minute_quota_without_a_delay_waits_a_minute() -> None:
    detail = {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}],
    }
    body = json.dumps({"error": {"code": 429, "details": [detail]}}).encode()
    assert read_gemini_error(429, body, now=NOW) == ErrorSignal(retry_after_s=60.0)


# --- Codex ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "name"),
    [
        ({"window_minutes": 300}, "5h"),
        ({"window_minutes": 10_080}, "7d"),
        ({"limit_window_seconds": 604_740}, "7d"),
        ({"limit_window_seconds": 17_940}, "5h"),
        ({"limit_window_seconds": 3600}, "60m"),
        ({}, "usage"),
    ],
)
def test_codex_limit_window_is_named_from_the_body(extra: dict[str, int], name: str) -> None:
    error = {"type": "usage_limit_reached", "resets_at": 1_790_003_600, **extra}
    signal = read_codex_error(429, json.dumps({"error": error}).encode(), now=NOW)
    (window,) = signal.windows
    assert (window.name, window.resets_at) == (name, 1_790_003_600.0)


def test_codex_limit_without_a_reset_is_rejected_until_further_notice() -> None:
    body = json.dumps({"error": {"type": "usage_limit_reached"}}).encode()
    signal = read_codex_error(429, body, now=NOW)
    (window,) = signal.windows
    assert (window.resets_at, signal.retry_after_s, signal.terminal) == (None, None, True)


@pytest.mark.parametrize(
    ("message", "wait"), [("try again in 644ms.", 0.644), ("in 2 seconds", None)]
)
def test_codex_transient_429_reads_its_wait_from_the_message(
    message: str, wait: float | None
) -> None:
    body = json.dumps({"error": {"code": "rate_limit_exceeded", "message": message}}).encode()
    assert read_codex_error(429, body, now=NOW).retry_after_s == pytest.approx(wait)


# --- Anthropic and OpenRouter -----------------------------------------------------------------


def test_anthropic_error_windows_keep_their_header_reading_otherwise() -> None:
    headers = {
        "anthropic-ratelimit-unified-5h-status": "rejected",
        "anthropic-ratelimit-unified-5h-utilization": "0.99",
        "anthropic-ratelimit-unified-5h-reset": "1790003600",
    }
    signal = read_anthropic_unified_error(429, headers, model="m", now=NOW)
    (window,) = signal.windows
    assert (window.source, window.used_percent, window.model) == ("error", 99.0, None)


def test_openrouter_429_with_only_a_reset_header_is_rejected_in_full() -> None:
    signal = read_openrouter_error(429, {"X-RateLimit-Reset": "30"}, b"{}", now=NOW)
    (window,) = signal.windows
    assert (window.used_percent, window.resets_at) == (100.0, NOW + 30)


@pytest.mark.parametrize("status", [200, 400, 401, 500])
def test_other_statuses_say_nothing(status: int) -> None:
    assert read_openrouter_error(status, {"retry-after": "9"}, b"{}", now=NOW) is NO_SIGNAL
    assert read_codex_error(status, b"{}", now=NOW) is NO_SIGNAL
    assert read_gemini_error(status, b"{}", now=NOW) is NO_SIGNAL
    assert read_anthropic_unified_error(status, {}, model="m", now=NOW) is NO_SIGNAL
