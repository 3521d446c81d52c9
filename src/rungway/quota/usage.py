"""Readers of plan and credit usage endpoints: polled readings, as opposed to header readings.

Each reader takes the body an endpoint returned and `now`, the instant it was received, and
returns what the body says; an unreadable body says nothing, so readers never raise.

- Claude `/api/oauth/usage` (docs/provider-signals.md A2.5): percent used (0..100, not a
  fraction) and ISO-8601 resets. Only the account-wide windows are taken: its per-model
  keys are codenames that do not name a model id, so per-model windows come from the
  response headers of requests to that model instead. `extra_usage.is_enabled` says
  whether use past the windows is billed.
- ChatGPT `wham/usage` (A4.4): the Codex plan's windows, named by length as in the headers,
  and whether `credits` pay for use past them.
- Copilot `copilot_internal/user` (A5.3): the monthly premium-request allowance, whether use
  past it is billed, and the free tier's chat and completions allowances.
- Gemini Code Assist `retrieveUserQuota` (A6.1): a daily bucket per model.
- OpenRouter `/api/v1/key` (A7): the key's credit limit, when it has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import orjson

from rungway.protocol import json_values
from rungway.quota.headers import codex_window_name
from rungway.quota.resets import parse_reset
from rungway.routing.snapshot import QuotaWindow, WindowStatus

_FLAT = {"five_hour": "5h", "seven_day": "7d"}
_LIMIT_KINDS = {"session": "5h", "weekly_all": "7d"}
_CODEX_SLOTS = ("primary", "secondary")
_FREE_COPILOT_QUOTAS = ("chat",)
_OPENROUTER_PERIOD_USAGE = {
    "daily": "usage_daily",
    "weekly": "usage_weekly",
    "monthly": "usage_monthly",
}


@dataclass(frozen=True, slots=True)
class PolledReading:
    """What a usage endpoint said: the windows, and whether use past them is billed
    (`overage_permitted`: Copilot's overage, Claude's extra usage, Codex credits; None when
    the endpoint does not say)."""

    windows: tuple[QuotaWindow, ...] = ()
    overage_permitted: bool | None = None


def read_claude_usage(body: bytes, *, now: float) -> PolledReading:
    """The 5h and 7d windows of a Claude plan from its usage endpoint's body, and whether
    extra usage bills past them."""
    data = _json_object(body)
    windows: dict[str, QuotaWindow] = {}
    for key, name in _FLAT.items():
        window = _claude_window(name, data.get(key), now)
        if window is not None:
            windows[name] = window
    # The newer shape's `limits[]` list wins where it is present.
    for limit in json_values.array(data.get("limits")):
        kind = limit.get("kind") if isinstance(limit, dict) else None
        if isinstance(kind, str) and kind in _LIMIT_KINDS:
            name = _LIMIT_KINDS[kind]
            window = _claude_window(name, limit, now)
            if window is not None:
                windows[name] = window
    # `extra_usage.is_enabled`: requests past a spent window are served and billed. An
    # enabled account whose monthly limit is spent still counts: the limit can be raised
    # at any time, and nothing here would notice before the next read.
    enabled = json_values.mapping(data.get("extra_usage")).get("is_enabled")
    return PolledReading(tuple(windows.values()), enabled if isinstance(enabled, bool) else None)


def _claude_window(name: str, entry: Any, now: float) -> QuotaWindow | None:
    if not isinstance(entry, dict):
        return None
    used = next((entry[k] for k in ("utilization", "percent", "percentage") if k in entry), None)
    if isinstance(used, bool) or not isinstance(used, int | float):
        return None
    resets = entry.get("resets_at") or entry.get("resetsAt")
    resets_at = _reset(resets, now=now) if isinstance(resets, str) else None
    status = WindowStatus.REJECTED if used >= 100 else WindowStatus.ALLOWED
    # A rounded or corrupted figure can fall outside 0..100; the status is read first.
    return QuotaWindow(name, _clamp_percent(used), resets_at, now, status=status, source="poll")


def read_codex_usage(body: bytes, *, now: float) -> PolledReading:
    """The ChatGPT plan's windows from the `wham/usage` body (docs/provider-signals.md A4.4).

    Each window is named by its length (`5h`, `7d`, else `<n>m`), as `read_codex` names the
    header windows, so a polled reading and a header reading of one window are one window.
    """
    data = _json_object(body)
    rate_limit = json_values.mapping(data.get("rate_limit"))
    # `additional_rate_limits` and `code_review_rate_limit` are not read: they meter separate
    # features (extra metered models, code review), not the plan's model access, and one
    # running out leaves ordinary requests on the plan unaffected.
    windows = []
    for slot in _CODEX_SLOTS:
        window = _codex_window(slot, json_values.mapping(rate_limit.get(f"{slot}_window")), now)
        if window is not None:
            windows.append(window)
    return PolledReading(tuple(windows), _codex_credits(data.get("credits")))


def _codex_credits(credits: Any) -> bool | None:
    # A4.4: credits pay for requests past a spent window; `credits` may be null.
    if not isinstance(credits, dict):
        return None
    has, unlimited = credits.get("has_credits"), credits.get("unlimited")
    if not isinstance(has, bool) and not isinstance(unlimited, bool):
        return None
    return has is True or unlimited is True


def _codex_window(slot: str, entry: dict[str, Any], now: float) -> QuotaWindow | None:
    used = _number(entry.get("used_percent"))
    if used is None:
        return None
    seconds = _number(entry.get("limit_window_seconds"))
    # A4.4: 17940 s and 604740 s; seconds become minutes rounded up, as the first-party
    # client does, and `codex_window_name` takes 299 and 10079 minutes for 5h and 7d.
    minutes = math.ceil(seconds / 60) if seconds is not None and seconds > 0 else 0
    # An epoch of 0 names no instant: it is how an absent reset would be zero-filled.
    reset_at = entry.get("reset_at")
    reset = None if reset_at == 0 else _reset(reset_at, now=now)
    if reset is None:
        reset = _reset(entry.get("reset_after_seconds"), now=now, relative=True)
    # The first-party client drops a window that carries no data: nothing used, no length
    # and no reset (A4.3); recorded Pro responses send such an empty secondary.
    if used == 0 and not minutes and reset is None:
        return None
    # `limit_reached`/`allowed` are not consulted: they do not say which window binds, and
    # the binding window reports 100 itself. A window of unknown length keeps its slot name,
    # as the header reader names it, so the two readings of it still meet in the store.
    return QuotaWindow(
        name=codex_window_name(minutes) if minutes else slot,
        used_percent=_clamp_percent(used),
        resets_at=reset,
        checked_at=now,
        status=WindowStatus.REJECTED if used >= 100 else WindowStatus.ALLOWED,
        source="poll",
    )


def read_copilot_user(body: bytes, *, now: float) -> PolledReading:
    """A Copilot seat's allowances from the `copilot_internal/user` body (A5.3).

    Paid plans get one window, `month`: the monthly premium-request allowance; an unlimited
    plan reads as a window with nothing used, so a strict ladder still sees a fresh,
    verified reading. The free tier gets `chat`, its monthly chat allowance (its
    `completions` allowance covers editor completions, which no request through the
    gateway uses). All are account-wide: a spent allowance gates the whole connection.
    """
    data = _json_object(body)
    premium = json_values.mapping(
        json_values.mapping(data.get("quota_snapshots")).get("premium_interactions")
    )
    windows = []
    if premium.get("unlimited") is True:
        windows.append(QuotaWindow("month", 0.0, None, now, source="poll"))
    elif premium:
        # `quota_remaining` is the exact (fractional) balance and `remaining` its rounding;
        # premium requests can cost a fraction of one, so the exact balance decides.
        remaining = _number(premium.get("quota_remaining"))
        if remaining is None:
            remaining = _number(premium.get("remaining"))
        left = _number(premium.get("percent_remaining"))
        used = 100.0 - left if left is not None else None
        if used is None:
            used = _used_of(remaining, _number(premium.get("entitlement")))
        reset = _reset(data.get("quota_reset_date_utc"), now=now)
        if reset is None:
            # A date alone means 00:00 UTC (A9); `parse_reset` reads it so.
            reset = _reset(data.get("quota_reset_date"), now=now)
        window = _allowance_window("month", used, remaining, reset, now)
        if window is not None:
            windows.append(window)
    limited = data.get("limited_user_quotas")
    if isinstance(limited, dict):
        # Free tier: `limited_user_quotas` holds what remains, `monthly_quotas` the allowance.
        monthly = json_values.mapping(data.get("monthly_quotas"))
        reset = _reset(data.get("limited_user_reset_date"), now=now)
        for name in _FREE_COPILOT_QUOTAS:
            remaining = _number(limited.get(name))
            used = _used_of(remaining, _number(monthly.get(name)))
            window = _allowance_window(name, used, remaining, reset, now)
            if window is not None:
                windows.append(window)
    overage = premium.get("overage_permitted")
    return PolledReading(tuple(windows), overage if isinstance(overage, bool) else None)


def read_gemini_quota(body: bytes, *, now: float) -> PolledReading:
    """Gemini Code Assist daily buckets from the `retrieveUserQuota` body (A6.1).

    Each bucket becomes a `1d` window scoped to its `modelId` (account-wide without one).
    When several buckets name one model, the most restrictive stands for it.
    """
    chosen: dict[str | None, QuotaWindow] = {}
    for bucket in json_values.array(_json_object(body).get("buckets")):
        window = _gemini_window(json_values.mapping(bucket), now)
        if window is None:
            continue
        held = chosen.get(window.model)
        if held is None or _restriction(window) > _restriction(held):
            chosen[window.model] = window
    return PolledReading(tuple(chosen.values()))


def _gemini_window(bucket: dict[str, Any], now: float) -> QuotaWindow | None:
    fraction = _number(bucket.get("remainingFraction"))
    if fraction is None:
        # `remainingAmount` is an int64, which protobuf JSON writes as a string (A6.1).
        amount = _number(bucket.get("remainingAmount"), text=True)
        if amount is None or amount > 0:
            return None
        fraction = 0.0
    model = bucket.get("modelId")
    return QuotaWindow(
        name="1d",
        used_percent=_clamp_percent((1.0 - fraction) * 100.0),
        resets_at=_reset(bucket.get("resetTime"), now=now),
        checked_at=now,
        model=(model.strip() or None) if isinstance(model, str) else None,
        status=WindowStatus.REJECTED if fraction <= 0 else WindowStatus.ALLOWED,
        source="poll",
    )


def _restriction(window: QuotaWindow) -> tuple[float, float]:
    # More used is tighter (a spent bucket is 100% used); on a tie, the later reset is the
    # longer wait.
    return (window.used_percent or 0.0, window.resets_at or 0.0)


def read_openrouter_key(body: bytes, *, now: float) -> PolledReading:
    """An OpenRouter key's credit limit from the `/api/v1/key` body (A7), as a `credits` window.

    A key without a limit (`limit: null`) is unlimited and has no window. The limit resets
    as `limit_reset` says: daily, weekly (from Monday) or monthly, at 00:00 UTC, or never.
    """
    data = _json_object(body)
    # The endpoint wraps the key in `data`; the legacy sample in A7 is quoted bare.
    key = json_values.mapping(data.get("data")) or data
    limit = _number(key.get("limit"))
    if limit is None:
        return PolledReading()
    period = key.get("limit_reset")
    period = period.strip().lower() if isinstance(period, str) else ""
    remaining = _number(key.get("limit_remaining"))
    if remaining is None:
        # Without `limit_remaining`, the usage of the limit's own period measures it: all-time
        # `usage` would count spending from periods that have already reset.
        usage = _number(key.get(_OPENROUTER_PERIOD_USAGE.get(period, "usage")))
        if usage is None:
            usage = _number(key.get("usage"))
        remaining = None if usage is None else limit - usage
    used = _used_of(remaining, limit) if limit > 0 else 100.0
    window = _allowance_window("credits", used, remaining, _next_period(period, now), now)
    return PolledReading(() if window is None else (window,))


def _next_period(period: str, now: float) -> float | None:
    # A7: the day, week (starting Monday) and month of OpenRouter's counters are UTC ones.
    today = datetime.fromtimestamp(now, UTC).date()
    if period == "daily":
        start = today + timedelta(days=1)
    elif period == "weekly":
        start = today + timedelta(days=7 - today.weekday())
    elif period == "monthly":
        start = date(today.year + today.month // 12, today.month % 12 + 1, 1)
    else:
        return None
    return datetime.combine(start, time(), UTC).timestamp()


def _used_of(remaining: float | None, allowance: float | None) -> float | None:
    if remaining is None or allowance is None or allowance <= 0:
        return None
    return 100.0 * (allowance - remaining) / allowance


def _allowance_window(
    name: str, used: float | None, remaining: float | None, resets_at: float | None, now: float
) -> QuotaWindow | None:
    # A spent allowance is 100% used whatever the percentage says: Copilot's `remaining`
    # goes negative past the allowance while `percent_remaining` stops at 0 (A5.3).
    if remaining is not None and remaining <= 0:
        used = 100.0
    if used is None:
        return None
    rejected = remaining <= 0 if remaining is not None else used >= 100
    return QuotaWindow(
        name=name,
        used_percent=_clamp_percent(used),
        resets_at=resets_at,
        checked_at=now,
        status=WindowStatus.REJECTED if rejected else WindowStatus.ALLOWED,
        source="poll",
    )


def _reset(value: Any, *, now: float, relative: bool = False) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    text = value if isinstance(value, str) else repr(value)
    return parse_reset(text, now=now, relative=relative)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return json_values.mapping(data)


def _number(value: Any, *, text: bool = False) -> float | None:
    # JSON `true` is no count; a string is a number only where the wire format says so.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    if isinstance(value, str) and not text:
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _clamp_percent(value: float) -> float:
    # A rounded figure or an overdrawn allowance can fall outside 0..100.
    return min(100.0, max(0.0, value))
