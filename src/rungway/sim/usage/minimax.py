"""The MiniMax Token Plan's quota endpoints over the plan's windows.

`GET /v1/token_plan/remains` and `GET /v1/api/openplatform/coding_plan/remains` answer
one `model_remains[]` row for text: the shortest account-wide window as the interval, a
window of 6 to 8 days as the weekly one. The default row is today's (`general`, counts 0,
`*_remaining_percent`); with `minimax.counts` it is the older `MiniMax-M2.5` row with
counts, whose `usage_count` is what is used on `token_plan` and what remains on
`coding_plan`, as on the real service. A wrong key is answered 200 with `base_resp`
1004 (docs/provider-signals.md, MiniMax Token Plan).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from rungway.sim.exchange import RecordedRequest, Reply
from rungway.sim.plan_settings import MiniMaxSpec
from rungway.sim.quota.windows import QuotaBook, WindowReading
from rungway.sim.scenario import Scenario
from rungway.sim.usage.reads import SimUsageEndpoint, UsageReads, retry_after
from rungway.sim.wire.plan_paths import bearer_or_api_key

TOKEN_PLAN = "/v1/token_plan/remains"
CODING_PLAN = "/v1/api/openplatform/coding_plan/remains"
ROUTES = frozenset({("GET", TOKEN_PLAN), ("GET", CODING_PLAN)})
_DAY_S = 86_400.0
_LIMITED = 1


def _base_resp(code: int, message: str) -> bytes:
    return orjson.dumps({"base_resp": {"status_code": code, "status_msg": message}})


def _too_many(wait_s: int) -> Reply:
    return Reply(429, _base_resp(1002, "rate limit exceeded"), (retry_after(wait_s),))


def _slot(
    reading: WindowReading, now: float, *, prefix: str, times: str, settings: MiniMaxSpec
) -> dict[str, Any]:
    start_ms = round((reading.reset_at - reading.spec.length_s) * 1000)
    fields: dict[str, Any] = {
        f"{times}start_time": start_ms,
        f"{times}end_time": round(reading.reset_at * 1000),
        f"{times}remains_time": max(0, round((reading.reset_at - now) * 1000)),
        f"{prefix}_status": _LIMITED,
        f"{prefix}_total_count": reading.capacity if settings.counts else 0,
        f"{prefix}_usage_count": 0,
    }
    if not settings.counts:
        left = reading.remaining * 100 / reading.capacity
        # Whole percents that read 0 only when nothing is left.
        fields[f"{prefix}_remaining_percent"] = max(1, math.floor(left)) if left > 0 else 0
    return fields


def minimax_remains(scenario: Scenario, book: QuotaBook) -> SimUsageEndpoint:
    """Both `remains` endpoints over the scenario's account-wide windows."""
    settings = scenario.minimax_settings or MiniMaxSpec()

    def render(request: RecordedRequest) -> Reply:
        now = book.clock.now()
        readings = [r for r in book.readings() if r.spec.model is None]
        weekly = next((r for r in readings if 6 * _DAY_S <= r.spec.length_s <= 8 * _DAY_S), None)
        short = [r for r in readings if r is not weekly]
        interval = min(short, key=lambda r: r.spec.length_s, default=None)
        row: dict[str, Any] = {"model_name": "MiniMax-M2.5" if settings.counts else "general"}
        counts_remaining = request.path == CODING_PLAN
        for reading, prefix, times in (
            (interval, "current_interval", ""),
            (weekly, "current_weekly", "weekly_"),
        ):
            if reading is None:
                continue
            row.update(_slot(reading, now, prefix=prefix, times=times, settings=settings))
            if settings.counts:
                left = reading.capacity - min(reading.used, reading.capacity)
                row[f"{prefix}_usage_count"] = left if counts_remaining else reading.used
        body = {
            "base_resp": {"status_code": 0, "status_msg": "success"},
            "current_subscribe_title": settings.title,
            "model_remains": [row],
        }
        return Reply(200, orjson.dumps(body))

    def authenticate(request: RecordedRequest) -> Reply | None:
        auth = scenario.auth
        if auth.kind == "none" or bearer_or_api_key(request) == auth.token:
            return None
        return Reply(200, _base_resp(1004, "cookie is missing, log in again"))

    reads = UsageReads(scenario.usage_reads_per_hour, book.clock, authenticate, _too_many)
    return SimUsageEndpoint(ROUTES, reads, render)
