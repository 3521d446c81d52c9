"""A Claude plan's OAuth usage endpoint: percent used (0..100) and ISO resets per window.

`GET /api/oauth/usage` answers only plan logins, and is itself rate limited, about 30
reads an hour (docs/provider-signals.md A2.5): past that it answers 429 with `Retry-After`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from rungway.protocol.anthropic_messages import error_body
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota import QuotaBook
from rungway.sim.scenario import Scenario
from rungway.sim.usage_reads import Authenticate, UsageEndpoint, UsageReads, retry_after

ROUTES = frozenset({("GET", "/api/oauth/usage")})


def _too_many(wait_s: int) -> Reply:
    body = error_body(429, "Rate limited. Please try again later.")
    return Reply(429, body, (retry_after(wait_s),))


def claude_usage(scenario: Scenario, book: QuotaBook, authenticate: Authenticate) -> UsageEndpoint:
    """The plan usage endpoint over the scenario's windows, keyed by claim name."""

    def render(request: RecordedRequest) -> Reply:
        usage: dict[str, Any] = {}
        for reading in book.readings():
            usage[reading.spec.claim_name] = {
                "utilization": round(reading.utilization * 100, 1),
                "resets_at": datetime.fromtimestamp(reading.reset_at, UTC).isoformat(),
            }
        return Reply(200, orjson.dumps(usage))

    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return UsageEndpoint(ROUTES, reads, render)
