"""Which limit a 429 hit: a per-minute throttle, a spent plan window, a spent budget, or a
refusal that says nothing; read from each provider's recorded errors and from the
simulated upstreams' own error bodies."""

from __future__ import annotations

from typing import Any

import pytest

from rungway.adapters.registry import provider_entry
from rungway.clock import FakeClock
from rungway.protocol.failures import Failure, FailureClass
from rungway.quota import (
    read_anthropic_unified_error,
    read_codex_error,
    read_gemini_error,
    read_openrouter_error,
)
from rungway.quota.board import QuotaBoard
from rungway.quota.errors import ErrorSignal
from rungway.quota.limits import LimitKind, limit_detail, limit_kind, limit_of_detail
from rungway.routing.settings import LadderSettings
from rungway.sim.quota.google_errors import credits_spent
from rungway.sim.wire.openai_errors import quota_exceeded

from .recorded import recorded
from .test_errors import READERS

THROTTLE, WINDOW, BUDGET, UNEXPLAINED = (
    LimitKind.THROTTLE,
    LimitKind.WINDOW,
    LimitKind.BUDGET,
    LimitKind.UNEXPLAINED,
)
EXPECTED: dict[str, LimitKind] = {
    # Claude (anthropic/quota_errors.json)
    "429 rejecting the 5h window: that window until its reset, and retry-after": WINDOW,
    "429 rejecting only Fable's 7d_oi window: scoped to that model": WINDOW,
    "429 with only the overall headers": WINDOW,
    "429 without unified headers is not plan exhaustion": THROTTLE,
    "429 whose unified windows are all allowed, with an HTTP-date retry-after": THROTTLE,
    # Codex (codex/errors.json)
    "usage_limit_reached with resets_at: the plan window until then": WINDOW,
    "usage_limit_reached with resets_in_seconds only": WINDOW,
    "usage_not_included: the plan does not cover the request": WINDOW,
    "any other 429 is a transient rate limit, with its try-again hint": THROTTLE,
    "a 429 with a non-JSON body is transient": UNEXPLAINED,
    # Gemini (gemini/errors.json)
    "API key, free tier per-day quota: terminal, daily window to Pacific midnight, "
    "despite a short RetryInfo": WINDOW,
    "API key, per-minute quota with RetryInfo: retry after the delay": THROTTLE,
    "protobuf duration with nanoseconds": THROTTLE,
    "Code Assist RATE_LIMIT_EXCEEDED with quotaResetDelay in ms": THROTTLE,
    "Code Assist RATE_LIMIT_EXCEEDED without a delay retries after 10 s": THROTTLE,
    "Code Assist QUOTA_EXHAUSTED with a reset delay: terminal until then": WINDOW,
    "Code Assist QUOTA_EXHAUSTED without a delay: terminal, no window": WINDOW,
    "a daily quota named only in ErrorInfo quota_limit": WINDOW,
    "INSUFFICIENT_G1_CREDITS_BALANCE is terminal": BUDGET,
    "a RetryInfo delay over 300 s is terminal": WINDOW,
    "the wait only in the message: Please retry in": THROTTLE,
    "the wait only in the message: reset after": WINDOW,
    "an array-wrapped Code Assist error": THROTTLE,
    "a bare error without details is retryable": UNEXPLAINED,
    # OpenRouter (openrouter/errors.json)
    "402 out of credits is terminal billing": BUDGET,
    "402 on a :free model with a negative balance is still billing": BUDGET,
    "402 from the in-flight budget with Retry-After is a wait": THROTTLE,
    "429 on free models with X-RateLimit headers and a millisecond reset": THROTTLE,
    "429 with a reset in epoch seconds and Retry-After": WINDOW,
    "429 without X-RateLimit headers: a wait, no window": THROTTLE,
}


@pytest.mark.parametrize(
    "case",
    [
        param
        for param in recorded(
            "anthropic/quota_errors.json",
            "codex/errors.json",
            "gemini/errors.json",
            "openrouter/errors.json",
        )
        if param.values[0]["status"] in (402, 429)
    ],
)
def test_each_providers_recorded_429_reads_as_its_limit(case: dict[str, Any]) -> None:
    assert READERS[case["reader"]](case).limit is EXPECTED[case["name"]]


def test_every_expectation_names_a_recorded_case() -> None:
    names = {
        param.values[0]["name"]
        for param in recorded(
            "anthropic/quota_errors.json",
            "codex/errors.json",
            "gemini/errors.json",
            "openrouter/errors.json",
        )
    }
    assert set(EXPECTED) <= names


def test_a_headerless_429_and_a_529_are_unexplained() -> None:
    assert read_anthropic_unified_error(429, {}, model="m", now=0.0).limit is UNEXPLAINED
    assert ErrorSignal().limit is UNEXPLAINED


def test_the_simulated_gemini_credits_error_is_a_spent_budget() -> None:
    reply = credits_spent("gemini-2.5-pro")
    signal = read_gemini_error(reply.status, reply.body, now=0.0)
    assert signal.limit is BUDGET


@pytest.mark.parametrize(
    ("provider", "status", "headers", "body", "expected"),
    [
        # Copilot's spent monthly premium allowance (the simulated seat's own 402).
        ("copilot", 402, {}, quota_exceeded().body, WINDOW),
        # Anthropic's API throttle, with its wait.
        (
            "anthropic",
            429,
            {"retry-after": "12"},
            b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
            THROTTLE,
        ),
        # Anthropic's 529 names no limit and no wait.
        (
            "anthropic",
            529,
            {},
            b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            UNEXPLAINED,
        ),
        # OpenRouter out of credits.
        ("openrouter", 402, {}, b'{"error":{"code":402,"message":"Insufficient credits"}}', BUDGET),
    ],
)
def test_an_adapters_failure_reads_as_its_limit(
    provider: str, status: int, headers: dict[str, str], body: bytes, expected: LimitKind
) -> None:
    failure = provider_entry(provider).adapter.classify_failure(status, headers, body)
    assert limit_kind(failure) is expected


def test_codex_and_openrouter_shapes_each_tell_throttle_from_window() -> None:
    spent = b'{"error": {"type": "usage_limit_reached", "resets_in_seconds": 9000}}'
    slow = b'{"error": {"type": "rate_limit_exceeded", "message": "Please try again in 6.2s"}}'
    assert read_codex_error(429, spent, now=0.0).limit is WINDOW
    assert read_codex_error(429, slow, now=0.0).limit is THROTTLE
    minute = {"x-ratelimit-limit": "20", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"}
    assert read_openrouter_error(429, minute, b"{}", now=0.0).limit is THROTTLE


@pytest.mark.parametrize(
    ("kind", "status", "wait", "expected"),
    [
        (FailureClass.RATE_LIMITED, 429, 12.0, THROTTLE),
        (FailureClass.RATE_LIMITED, 429, None, UNEXPLAINED),
        (FailureClass.RATE_LIMITED, 429, 7_200.0, WINDOW),
        (FailureClass.QUOTA_EXHAUSTED, 429, 3_600.0, WINDOW),
        (FailureClass.BILLING, 402, None, BUDGET),
        (FailureClass.OVERLOADED, 529, None, UNEXPLAINED),
        (FailureClass.OVERLOADED, 503, None, None),
        (FailureClass.SERVER, 500, None, None),
        (FailureClass.BAD_REQUEST, 400, None, None),
    ],
)
def test_a_failure_carries_its_limit_kind(
    kind: FailureClass, status: int, wait: float | None, expected: LimitKind | None
) -> None:
    failure = Failure(kind, "said the upstream", status, retry_after_s=wait)
    assert limit_kind(failure) is expected
    detail = limit_detail(failure)
    assert limit_of_detail(detail) is expected
    assert detail.endswith("said the upstream")


def test_a_cooldown_reason_names_its_limit_on_the_board() -> None:
    board = QuotaBoard(LadderSettings())
    clock = FakeClock(1_000.0)
    board.failed("c1", Failure(FailureClass.RATE_LIMITED, "slow down", 429, 20.0), clock.now())
    board.failed("c2", Failure(FailureClass.RATE_LIMITED, "busy", 429), clock.now())
    states = board.connection_states(clock.now())
    assert states["c1"].cooldown_reason == "rate_limited (throttle): slow down"
    assert limit_of_detail(states["c1"].cooldown_reason) is THROTTLE
    assert limit_of_detail(states["c2"].cooldown_reason) is UNEXPLAINED


def test_a_detail_without_a_kind_reads_as_none() -> None:
    assert limit_of_detail("") is None
    assert limit_of_detail("upstream said: no") is None
    assert limit_of_detail("quota_exhausted: 5h") is None
