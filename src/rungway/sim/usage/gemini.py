"""Gemini Code Assist's quota: `POST /v1internal:retrieveUserQuota`.

Per docs/provider-signals.md A6.1 the answer is `{"buckets": [...]}`, each bucket with
`remainingAmount` (an int64, so a JSON string), `remainingFraction` (0..1), an RFC 3339
`resetTime`, `tokenType` and `modelId`. Each model-scoped window is one bucket; a window
that applies to every model is a bucket without `modelId`. The request body (`project`,
`userAgent`) is accepted and not checked.
"""

from __future__ import annotations

from typing import Any

import orjson

from rungway.sim.credential import credential_check
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota.google_errors import error_reply, unauthenticated
from rungway.sim.quota.windows import QuotaBook, WindowReading, rfc3339
from rungway.sim.scenario import Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after

ROUTES = frozenset({("POST", "/v1internal:retrieveUserQuota")})


def _too_many(wait_s: int) -> Reply:
    # The bare form of a Google 429 (A6.2), without google.rpc details.
    return error_reply(429, headers=(retry_after(wait_s),))


def bucket(reading: WindowReading) -> dict[str, Any]:
    """One quota bucket for a window."""
    entry: dict[str, Any] = {
        "remainingAmount": str(reading.remaining),
        "remainingFraction": reading.remaining / reading.capacity,
        "resetTime": rfc3339(reading.reset_at),
        # Only request buckets are documented; token windows are labelled by analogy.
        "tokenType": "REQUESTS" if reading.spec.unit == "requests" else "TOKENS",
    }
    if reading.spec.model is not None:
        entry["modelId"] = reading.spec.model
    return entry


def gemini_quota(scenario: Scenario, book: QuotaBook) -> SimUsageEndpoint:
    """`retrieveUserQuota` over the scenario's windows, one bucket each."""

    def render(request: RecordedRequest) -> Reply:
        return Reply(200, orjson.dumps({"buckets": [bucket(r) for r in book.readings()]}))

    # The same 401 as the Code Assist methods next to it.
    authenticate = credential_check(scenario.auth, unauthenticated)
    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
