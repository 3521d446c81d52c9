"""A ChatGPT plan's usage endpoint as Codex reads it: `GET /backend-api/wham/usage`.

Codex reads `{base}/wham/usage` when its base URL contains `/backend-api`, else
`{base}/api/codex/usage`; both answer the same body (docs/provider-signals.md A4.4):
`plan_type`, `rate_limit{allowed, limit_reached, primary_window, secondary_window}`
with integer `used_percent`, and `credits`. Windows are the same primary and secondary
the `x-codex-*` headers report; with credits, a spent window has its limit reached while
requests are still allowed.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from rungway.sim.credential import Authenticate
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota.codex import reset_after_s, subscription_windows
from rungway.sim.quota.windows import QuotaBook, WindowReading
from rungway.sim.scenario import CodexSpec, Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after
from rungway.sim.wire.openai_errors import error_reply

ROUTES = frozenset({("GET", "/backend-api/wham/usage"), ("GET", "/api/codex/usage")})


def _too_many(wait_s: int) -> Reply:
    message = f"Rate limit reached for usage reads. Please try again in {wait_s}s."
    return error_reply(
        429,
        message,
        error_type="requests",
        code="rate_limit_exceeded",
        headers=(retry_after(wait_s),),
    )


def window_body(
    reading: WindowReading | None, spec: CodexSpec, now: float
) -> dict[str, Any] | None:
    """One `RateLimitWindowSnapshot` (None for a window the plan does not have)."""
    if reading is None:
        return None
    return {
        # Whole percent, rounded down (as the headers' one decimal is) so 100 means spent.
        "used_percent": min(100, reading.used * 100 // reading.capacity),
        "limit_window_seconds": max(0, int(reading.spec.length_s) - spec.window_seconds_short_by),
        "reset_after_seconds": reset_after_s(reading, now),
        "reset_at": math.ceil(reading.reset_at),
    }


def codex_usage(
    scenario: Scenario, book: QuotaBook, authenticate: Authenticate
) -> SimUsageEndpoint:
    """The usage endpoint over the plan's primary and secondary windows."""
    spec = scenario.codex_settings or CodexSpec()

    def render(request: RecordedRequest) -> Reply:
        now = book.clock.now()
        primary, secondary = subscription_windows(book.readings())
        reached = any(window is not None and window.spent for window in (primary, secondary))
        # Credits pay for requests past a spent window (A4.4), so those are still allowed.
        paid = spec.credits.has_credits or spec.credits.unlimited
        body = {
            "plan_type": spec.plan_type,
            "rate_limit": {
                "allowed": not reached or paid,
                "limit_reached": reached,
                "primary_window": window_body(primary, spec, now),
                "secondary_window": window_body(secondary, spec, now),
            },
            "credits": spec.credits.model_dump(),
        }
        return Reply(200, orjson.dumps(body))

    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
