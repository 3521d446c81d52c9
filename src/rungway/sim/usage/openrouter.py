"""An OpenRouter key's own description: `GET /api/v1/key` (legacy `/api/v1/auth/key`).

The body follows docs/provider-signals.md A7: `{"data": {label, limit (null =
unlimited), limit_reset, limit_remaining, usage, usage_daily, usage_weekly,
usage_monthly, byok_usage*, is_free_tier, rate_limit, ...}}`, in credits, read off the
same ledger that charges and refuses chat requests. Errors are OpenRouter-shaped:
`{"error": {"code", "message"}}` with the HTTP status equal to `code`.
"""

from __future__ import annotations

import orjson

from rungway.sim.credential import credential_check
from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota.credits import CreditLedger
from rungway.sim.quota.windows import QuotaBook
from rungway.sim.scenario import CreditsSpec, Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after

ROUTES = frozenset({("GET", "/api/v1/key"), ("GET", "/api/v1/auth/key")})
# Still sent, with this note, though nothing enforces it any more (A7).
RATE_LIMIT = {
    "requests": -1,
    "interval": "10s",
    "note": "This field is deprecated and safe to ignore.",
}


def openrouter_error(
    status: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> Reply:
    """`{"error": {"code": status, "message": ...}}` with the same HTTP status."""
    return Reply(status, orjson.dumps({"error": {"code": status, "message": message}}), headers)


def _unauthorized(sent: str | None) -> Reply:
    return openrouter_error(401, "No auth credentials found" if sent is None else "User not found.")


def _too_many(wait_s: int) -> Reply:
    return openrouter_error(429, "Rate limit exceeded", (retry_after(wait_s),))


def openrouter_key(scenario: Scenario, book: QuotaBook, ledger: CreditLedger) -> SimUsageEndpoint:
    """The key endpoint over `ledger`."""
    settings = scenario.credit_settings or CreditsSpec()

    def render(request: RecordedRequest) -> Reply:
        credits = ledger.state()
        data = {
            "label": settings.label,
            "limit": credits.limit,
            "limit_reset": credits.limit_reset,
            "limit_remaining": credits.limit_remaining,
            "include_byok_in_limit": False,
            "usage": credits.usage,
            "usage_daily": credits.usage_daily,
            "usage_weekly": credits.usage_weekly,
            "usage_monthly": credits.usage_monthly,
            "byok_usage": 0.0,
            "byok_usage_daily": 0.0,
            "byok_usage_weekly": 0.0,
            "byok_usage_monthly": 0.0,
            "is_free_tier": settings.is_free_tier,
            "is_management_key": False,
            "is_provisioning_key": False,
            "rate_limit": RATE_LIMIT,
            "expires_at": None,
            "creator_user_id": None,
        }
        return Reply(200, orjson.dumps({"data": data}))

    authenticate = credential_check(scenario.auth, _unauthorized)
    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
