"""A plan's OAuth usage endpoint: percent used (0..100) and ISO resets per window.

It answers only plan logins, and is itself rate limited, about 30 reads an hour
(provider-signals.md A2.5): past that it answers 429 with `Retry-After`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from rungway.protocol.anthropic_messages import error_body
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota import QuotaBook
from rungway.sim.scenario import Scenario

Authenticate = Callable[[RecordedRequest], Reply | None]


class PlanUsageEndpoint:
    """`GET /api/oauth/usage` over the scenario's quota windows."""

    def __init__(self, scenario: Scenario, book: QuotaBook, authenticate: Authenticate) -> None:
        self._limit = scenario.usage_reads_per_hour
        self._book = book
        self._authenticate = authenticate
        self._reads: list[float] = []

    def answer(self, request: RecordedRequest) -> Reply:
        """The usage of every window, or the endpoint's own refusal."""
        refused = self._authenticate(request)
        if refused is not None:
            return refused
        now = self._book.clock.now()
        self._reads = [at for at in self._reads if at > now - 3600]
        if len(self._reads) >= self._limit:
            wait = int(self._reads[0] + 3600 - now) + 1
            body = error_body(429, "Rate limited. Please try again later.")
            return Reply(429, body, ((b"retry-after", str(wait).encode()),))
        self._reads.append(now)
        usage: dict[str, Any] = {}
        for reading in self._book.readings():
            usage[reading.spec.claim or reading.spec.name] = {
                "utilization": round(reading.utilization * 100, 1),
                "resets_at": datetime.fromtimestamp(reading.reset_at, UTC).isoformat(),
            }
        return Reply(200, orjson.dumps(usage))
