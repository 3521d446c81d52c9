"""A GitHub Copilot seat's quota: `GET /copilot_internal/user` and the exhausted-seat 402.

The body follows docs/provider-signals.md A5.3. `premium_interactions` is read off the
seat's premium-request window: `remaining` and `quota_remaining` go negative once the
allowance is spent (with overage permitted requests keep being served), while
`percent_remaining` is clamped at 0. `credits_used` is reported without the hours of lag
seen on the real endpoint. A seat without a premium window is unlimited, reported as
business plans are (`unlimited: true`, `entitlement: 0`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from rungway.sim.credential import credential_check
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota.windows import QuotaBook, WindowReading
from rungway.sim.scenario import CopilotSpec, Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after

ROUTES = frozenset({("GET", "/copilot_internal/user")})
DEFAULT_API = "https://api.individual.githubcopilot.com"
RATE_LIMIT_DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"


def _github_error(
    status: int, message: str, docs: str = "https://docs.github.com/rest", wait_s: int | None = None
) -> Reply:
    body = {"message": message, "documentation_url": docs, "status": str(status)}
    headers = () if wait_s is None else (retry_after(wait_s),)
    return Reply(status, orjson.dumps(body), headers)


def _unauthorized(sent: str | None) -> Reply:
    return _github_error(401, "Requires authentication" if sent is None else "Bad credentials")


def _too_many(wait_s: int) -> Reply:
    return _github_error(429, "API rate limit exceeded for user.", RATE_LIMIT_DOCS, wait_s)


def _utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


def _iso_millis(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _next_month(now: float) -> datetime:
    today = _utc(now)
    year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def _unlimited(quota_id: str, stamp: str) -> dict[str, Any]:
    return {
        "entitlement": 0,
        "remaining": 0,
        "quota_remaining": 0.0,
        "percent_remaining": 100.0,
        "credits_used": 0,
        "unlimited": True,
        "overage_count": 0,
        "overage_permitted": False,
        "quota_id": quota_id,
        "timestamp_utc": stamp,
        "has_quota": True,
    }


def premium_snapshot(
    reading: WindowReading | None, settings: CopilotSpec, stamp: str
) -> dict[str, Any]:
    """`quota_snapshots.premium_interactions` for the premium window (None: unlimited)."""
    if reading is None:
        return _unlimited("premium_interactions", stamp)
    remaining = reading.capacity - reading.used
    return {
        "entitlement": reading.capacity,
        "remaining": remaining,
        "quota_remaining": float(remaining),
        "percent_remaining": max(0.0, remaining * 100 / reading.capacity),
        "credits_used": reading.used,
        "unlimited": False,
        "overage_count": reading.overage,
        "overage_permitted": settings.overage_permitted,
        "quota_id": "premium_interactions",
        "timestamp_utc": stamp,
        # Whether the next premium request would be served.
        "has_quota": remaining > 0 or settings.overage_permitted,
    }


def copilot_usage(scenario: Scenario, book: QuotaBook) -> SimUsageEndpoint:
    """`GET /copilot_internal/user` over the seat's premium window."""
    settings = scenario.copilot_settings or CopilotSpec()
    premium = scenario.premium_window()
    premium_name = None if premium is None else premium.name

    def render(request: RecordedRequest) -> Reply:
        now = book.clock.now()
        reading = next((r for r in book.readings() if r.spec.name == premium_name), None)
        resets = _utc(reading.reset_at) if reading is not None else _next_month(now)
        stamp = _iso_millis(_utc(now))
        host = request.header("host")
        body = {
            "login": settings.login,
            "copilot_plan": settings.plan,
            "access_type_sku": settings.sku,
            "chat_enabled": True,
            "quota_reset_date": resets.strftime("%Y-%m-%d"),
            "quota_reset_date_utc": _iso_millis(resets),
            "quota_snapshots": {
                "premium_interactions": premium_snapshot(reading, settings, stamp),
                "chat": _unlimited("chat", stamp),
                "completions": _unlimited("completions", stamp),
            },
            # Clients send inference to `endpoints.api` (A5.1): here, this sim itself.
            "endpoints": {"api": f"http://{host}" if host else DEFAULT_API},
        }
        return Reply(200, orjson.dumps(body))

    # GitHub takes the login as `token <t>` as well as `Bearer <t>` (A5.3).
    authenticate = credential_check(scenario.auth, _unauthorized, ("token", "bearer"))
    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
