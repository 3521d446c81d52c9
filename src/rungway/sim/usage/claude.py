"""A Claude plan's OAuth usage endpoint: percent used (0..100) and ISO resets per window.

`GET /api/oauth/usage` answers only plan logins, and is itself rate limited, about 30
reads an hour (docs/provider-signals.md A2.5): past that it answers 429 with `Retry-After`.
A plan with extra usage settings also reports `extra_usage`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from rungway.protocol.anthropic_messages import error_body
from rungway.sim.credential import Authenticate
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota.windows import QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after

ROUTES = frozenset({("GET", "/api/oauth/usage")})


def _too_many(wait_s: int) -> Reply:
    body = error_body(429, "Rate limited. Please try again later.")
    return Reply(429, body, (retry_after(wait_s),))


def claude_usage(
    scenario: Scenario, book: QuotaBook, authenticate: Authenticate
) -> SimUsageEndpoint:
    """The plan usage endpoint over the scenario's windows, keyed by claim name."""

    def render(request: RecordedRequest) -> Reply:
        usage: dict[str, Any] = {}
        for reading in book.readings():
            usage[reading.spec.claim_name] = {
                "utilization": round(reading.utilization * 100, 1),
                "resets_at": datetime.fromtimestamp(reading.reset_at, UTC).isoformat(),
            }
        extra = scenario.extra_usage
        if extra is not None:
            limit = extra.monthly_limit
            usage["extra_usage"] = {
                "is_enabled": extra.enabled,
                "monthly_limit": limit if extra.enabled else None,
                "used_credits": extra.used_credits if extra.enabled else None,
                "utilization": round(100 * extra.used_credits / limit, 1)
                if extra.enabled and limit
                else None,
            }
        return Reply(200, orjson.dumps(usage))

    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
