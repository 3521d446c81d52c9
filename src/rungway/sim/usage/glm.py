"""The GLM Coding Plan's usage endpoint: `GET /api/monitor/usage/quota/limit`.

It answers the plan key (`Authorization: Bearer`, or `x-api-key`) with
`{"code":200,"msg":"操作成功","success":true,"data":{"limits":[...],"level":"pro"}}`
(rungway.quota.glm has the shape and its sources). Each scenario window is one
`TOKENS_LIMIT` with its length as `unit`/`number` and only `percentage` (percent used,
whole, rounded down so 100 means spent); a window nothing has been spent in yet has not
started and carries no `nextResetTime`. A fixed monthly `TIME_LIMIT` tool-call allowance
(nothing used) stands beside them, as on the real plan. A wrong key answers the
endpoint's own 401 envelope, too many reads its 429.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.quota.windows import QuotaBook, WindowReading
from rungway.sim.scenario import Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after
from rungway.sim.wire.plan_paths import bearer_or_api_key

ROUTES = frozenset({("GET", "/api/monitor/usage/quota/limit")})
TOOL_CALLS_A_MONTH = 1000
# GLM's unit codes: 3 = hours, 4 = days, 6 = weeks.
_UNITS = ((7 * 86400.0, 6), (86400.0, 4), (3600.0, 3))


def _envelope(code: int, message: str) -> bytes:
    return orjson.dumps({"code": code, "msg": message, "success": False})


def _too_many(wait_s: int) -> Reply:
    body = _envelope(429, "Too many requests, please try again later")
    return Reply(429, body, (retry_after(wait_s),))


def _unauthorized() -> Reply:
    return Reply(401, _envelope(401, "令牌已过期或验证不正确"))


def _unit(length_s: float) -> tuple[int, int]:
    for seconds, unit in _UNITS:
        if length_s >= seconds and length_s % seconds == 0:
            return unit, int(length_s // seconds)
    return 3, max(1, round(length_s / 3600))


def token_limit(reading: WindowReading) -> dict[str, Any]:
    """One `TOKENS_LIMIT` entry for a window."""
    unit, number = _unit(reading.spec.length_s)
    entry: dict[str, Any] = {
        "type": "TOKENS_LIMIT",
        "unit": unit,
        "number": number,
        "percentage": min(100, reading.used * 100 // reading.capacity),
    }
    if reading.used > 0:
        entry["nextResetTime"] = int(reading.reset_at * 1000)
    return entry


def _next_month_ms(now: float) -> int:
    today = datetime.fromtimestamp(now, UTC)
    year, month = (today.year + 1, 1) if today.month == 12 else (today.year, today.month + 1)
    return int(datetime(year, month, 1, tzinfo=UTC).timestamp() * 1000)


def glm_quota(scenario: Scenario, book: QuotaBook) -> SimUsageEndpoint:
    """The quota endpoint over the plan's windows."""

    def authenticate(request: RecordedRequest) -> Reply | None:
        # The plan key, as a bearer (what clients send here) or `x-api-key`.
        if scenario.auth.kind == "none" or bearer_or_api_key(request) == scenario.auth.token:
            return None
        return _unauthorized()

    def render(request: RecordedRequest) -> Reply:
        now = book.clock.now()
        limits: list[dict[str, Any]] = [
            {
                "type": "TIME_LIMIT",
                "unit": 5,
                "number": 1,
                "usage": TOOL_CALLS_A_MONTH,
                "currentValue": 0,
                "remaining": TOOL_CALLS_A_MONTH,
                "percentage": 0,
                "nextResetTime": _next_month_ms(now),
                "usageDetails": [],
            }
        ]
        limits.extend(token_limit(r) for r in book.readings() if r.spec.model is None)
        data = {"limits": limits, "level": "pro"}
        body = {"code": 200, "msg": "操作成功", "success": True, "data": data}
        return Reply(200, orjson.dumps(body))

    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
