"""Kimi Code's usage endpoint, `GET /coding/v1/usages`, over the plan's windows.

Each window is reported as Kimi does, percent-style: `limit` "100", `used` and `remaining`
as decimal strings, resets ISO-8601 with microseconds. The weekly window (6 to 8 days
long) is the top-level `usage`, which names no window; every other one is a `limits[]`
entry with its length in `TIME_UNIT_MINUTE`. A booster wallet is reported when the
scenario gives one (docs/provider-signals.md, Kimi Code).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import orjson

from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.plan_settings import KimiSpec
from rungway.sim.quota.windows import QuotaBook, WindowReading
from rungway.sim.scenario import Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after
from rungway.sim.wire.kimi_code import kimi_authenticate, kimi_error

ROUTES = frozenset({("GET", "/coding/v1/usages")})
TOO_MANY = "We're receiving too many requests at the moment. Please wait a moment and try again."
_FIXED_POINT_PER_CENT = 1_000_000
_WALLET_CENTS = 2_500
_DAY_S = 86_400.0


def _too_many(wait_s: int) -> Reply:
    reply = kimi_error(429, "rate_limit_reached_error", TOO_MANY)
    return Reply(reply.status, reply.body, (retry_after(wait_s),))


def _detail(reading: WindowReading) -> dict[str, str]:
    # Whole percents, rounded so that a window reads spent only once it is.
    used = 100 if reading.spent else min(99, math.floor(reading.utilization * 100))
    stamp = datetime.fromtimestamp(reading.reset_at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"limit": "100", "used": str(used), "remaining": str(100 - used), "resetTime": stamp}


def booster_wallet(settings: KimiSpec) -> dict[str, Any]:
    """`boosterWallet`: the balance in millionths of a cent and the monthly cap."""
    wallet: dict[str, Any] = {
        "balance": {
            "type": "BOOSTER",
            "amount": str(max(_WALLET_CENTS, math.ceil(settings.booster_cents)) * 1_000_000),
            "amountLeft": str(round(settings.booster_cents * _FIXED_POINT_PER_CENT)),
        },
        "monthlyChargeLimitEnabled": settings.monthly_cap_cents is not None,
        "monthlyUsed": {"currency": "USD", "priceInCents": str(settings.monthly_used_cents)},
    }
    if settings.monthly_cap_cents is not None:
        cap = str(settings.monthly_cap_cents)
        wallet["monthlyChargeLimit"] = {"currency": "USD", "priceInCents": cap}
    return wallet


def kimi_usages(scenario: Scenario, book: QuotaBook) -> SimUsageEndpoint:
    """`GET /coding/v1/usages` over the scenario's account-wide windows."""
    settings = scenario.kimi_settings or KimiSpec()

    def render(request: RecordedRequest) -> Reply:
        body: dict[str, Any] = {
            "user": {"userId": f"sim-{scenario.name}", "membership": {"level": settings.level}},
            "limits": [],
            "authentication": {"method": "METHOD_API_KEY", "scope": "FEATURE_CODING"},
        }
        for reading in book.readings():
            if reading.spec.model is not None:
                continue
            if 6 * _DAY_S <= reading.spec.length_s <= 8 * _DAY_S:
                body["usage"] = _detail(reading)
            else:
                minutes = round(reading.spec.length_s / 60)
                window = {"duration": minutes, "timeUnit": "TIME_UNIT_MINUTE"}
                body["limits"].append({"window": window, "detail": _detail(reading)})
        if settings.booster_cents > 0:
            body["boosterWallet"] = booster_wallet(settings)
        return Reply(200, orjson.dumps(body))

    def authenticate(request: RecordedRequest) -> Reply | None:
        return kimi_authenticate(scenario, request)

    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
