"""Kimi Code's usage endpoint, `GET {base}/v1/usages` (docs/provider-signals.md, Kimi Code).

Counts are decimal strings against a percent-style `limit` of "100", and resets ISO-8601
with microseconds. `usage` is the weekly summary, which the backend sends without a
window; each `limits[]` entry names its own (`300 TIME_UNIT_MINUTE` is the 5-hour
window). A later shape reported second-hand, `usages.limit_5h`, `limit_7d` and
`limit_month_*` as `{used_ratio, reset_time}`, is read too. `boosterWallet` is the extra
usage that is billed once the plan's quota is spent: with a balance left and its monthly
cap not reached, requests past the windows are served and billed.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from rungway.protocol import json_values
from rungway.quota.headers import codex_window_name
from rungway.quota.resets import parse_reset
from rungway.quota.usage import PolledReading
from rungway.routing.snapshot import QuotaWindow, WindowStatus

_UNIT_MINUTES = {
    "TIME_UNIT_MINUTE": 1,
    "TIME_UNIT_HOUR": 60,
    "TIME_UNIT_DAY": 1440,
    "TIME_UNIT_WEEK": 10080,
}
_RATIO_WINDOWS = {
    "limit_5h": "5h",
    "limit_7d": "7d",
    "limit_month_total": "month",
    "limit_month_code": "month_code",
}
_FIXED_POINT_PER_CENT = 1_000_000
"""Booster amounts are fixed point: a millionth of a cent (the first-party client's
`FIXED_POINT_CENTS`)."""


def read_kimi_usage(body: bytes, *, now: float) -> PolledReading:
    """The 5h, weekly (`7d`) and monthly windows of a Kimi Code plan, and whether its booster
    wallet bills past them."""
    data = _json_object(body)
    windows: dict[str, QuotaWindow] = {}
    weekly = _count_window("7d", json_values.mapping(data.get("usage")), now)
    if weekly is not None:
        windows[weekly.name] = weekly
    for item in json_values.array(data.get("limits")):
        entry = json_values.mapping(item)
        minutes = _window_minutes(json_values.mapping(entry.get("window")))
        if minutes is None:
            continue
        window = _count_window(
            codex_window_name(minutes), json_values.mapping(entry.get("detail")), now
        )
        if window is not None:
            windows[window.name] = window
    usages = json_values.mapping(data.get("usages"))
    for key, name in _RATIO_WINDOWS.items():
        window = _ratio_window(name, json_values.mapping(usages.get(key)), now)
        if window is not None:
            windows[name] = window
    if not windows:
        return PolledReading()
    return PolledReading(tuple(windows.values()), _booster_serves(data.get("boosterWallet")))


def booster_cents_left(wallet: object) -> float | None:
    """What is left in a booster wallet, in cents (None when there is no booster)."""
    balance = json_values.mapping(json_values.mapping(wallet).get("balance"))
    if balance.get("type") != "BOOSTER":
        return None
    total = _decimal(balance.get("amount"))
    left = _decimal(balance.get("amountLeft"))
    if total is None or total <= 0 or left is None:
        return None
    return left / _FIXED_POINT_PER_CENT


def _booster_serves(wallet: object) -> bool:
    # A plan without a wallet (or with an empty or capped one) stops at its quota: the
    # 403 that follows says to "purchase extra usage".
    left = booster_cents_left(wallet)
    if left is None or left <= 0:
        return False
    wallet = json_values.mapping(wallet)
    if wallet.get("monthlyChargeLimitEnabled") is True:
        cap = _decimal(json_values.mapping(wallet.get("monthlyChargeLimit")).get("priceInCents"))
        spent = _decimal(json_values.mapping(wallet.get("monthlyUsed")).get("priceInCents"))
        if cap is not None and spent is not None and spent >= cap:
            return False
    return True


def _window_minutes(window: dict[str, Any]) -> int | None:
    duration = _decimal(window.get("duration"))
    unit = _UNIT_MINUTES.get(str(window.get("timeUnit")))
    if duration is None or duration <= 0 or unit is None:
        return None
    return round(duration * unit)


def _count_window(name: str, detail: dict[str, Any], now: float) -> QuotaWindow | None:
    limit = _decimal(detail.get("limit"))
    if limit is None or limit <= 0:
        return None
    used = _decimal(detail.get("used"))
    remaining = _decimal(detail.get("remaining"))
    # Either count may be missing; the other is derived from the limit.
    if used is None and remaining is not None:
        used = limit - remaining
    if remaining is None and used is not None:
        remaining = limit - used
    if used is None or remaining is None:
        return None
    return _window(name, 100.0 * used / limit, remaining <= 0, detail.get("resetTime"), now)


def _ratio_window(name: str, entry: dict[str, Any], now: float) -> QuotaWindow | None:
    ratio = _decimal(entry.get("used_ratio"))
    if ratio is None:
        return None
    return _window(name, 100.0 * ratio, ratio >= 1.0, entry.get("reset_time"), now)


def _window(name: str, used: float, spent: bool, reset: object, now: float) -> QuotaWindow:
    resets_at = parse_reset(reset, now=now) if isinstance(reset, str) else None
    return QuotaWindow(
        name=name,
        used_percent=min(100.0, max(0.0, used)),
        resets_at=resets_at,
        checked_at=now,
        status=WindowStatus.REJECTED if spent or used >= 100 else WindowStatus.ALLOWED,
        source="poll",
    )


def _decimal(value: object) -> float | None:
    # The endpoint writes its int64 counts as strings, as protobuf JSON does; plain numbers
    # are taken too. A boolean is no count.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        return json_values.mapping(orjson.loads(body))
    except orjson.JSONDecodeError:
        return {}
