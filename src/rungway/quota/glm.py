"""The GLM Coding Plan's quota signals (Z.ai, `open.bigmodel.cn` in China; A10 of
docs/provider-signals.md, with its sources).

Its usage endpoint, `GET /api/monitor/usage/quota/limit`, answers
`{"code":200,"success":true,"data":{"limits":[...],"planName"|"level":...}}`. Each limit
has a `type`, a window length as `unit` and `number` (unit 3 = hours, 4 = days, 5 =
months, 6 = weeks: `unit 3, number 5` is the 5-hour window), and `nextResetTime` in epoch
milliseconds, absent while the window has not started:

- `TOKENS_LIMIT`: the model-token windows (5 hours, a week), with only `percentage`, the
  percent used (0..100, sometimes a string);
- `TIME_LIMIT`: the monthly allowance of tool calls (web search, web reader), with counts
  `usage` (the allowance), `currentValue` (used) and `remaining`. Model requests never
  spend it, so a spent one leaves model access alone: it is read, not gated on.

Its errors are all HTTP 429, `{"error":{"code":"<business code>","message":"..."}}`, told
apart by the code: 1302 (too many requests at once) and 1305 (overloaded) pass; 1308,
1310 and 1316-1321 say a window is spent and name its reset in the message, as a UTC+8
wall-clock time ("您的限额将在 2026-08-25 07:41:44 重置") or an ISO instant; 1309 says the plan
expired and 1113 that the balance is empty, which no wait mends.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

from rungway.protocol import json_values
from rungway.quota.errors import NO_SIGNAL, ErrorSignal
from rungway.quota.resets import parse_reset
from rungway.quota.usage import PolledReading
from rungway.routing.snapshot import QuotaWindow, WindowStatus

CHINA_TIME = timezone(timedelta(hours=8), "UTC+8")
"""The zone of the wall-clock resets in GLM's messages (China Standard Time, no DST)."""

THROTTLE_CODES = frozenset({"1302", "1305"})
"""Transient: too many requests at once, or the service overloaded; a retry soon may pass."""
SPENT_CODES = frozenset({"1308", "1310", "1316", "1317", "1318", "1319", "1320", "1321"})
"""A plan window is spent until the reset its message names."""
ENDED_CODES = frozenset({"1309", "1113"})
"""The plan expired (1309) or the account has no balance (1113): no wait mends it."""

# unit code -> seconds per unit (month as 30 days: only the window's name uses it).
_UNIT_SECONDS = {3: 3600, 4: 86400, 5: 30 * 86400, 6: 7 * 86400}
_CODE_WINDOWS = {"1316": "5h", "1317": "7d", "1318": "5h", "1319": "7d"}
# Read after `_ISO_INSTANT`, so a date and time left has no offset.
_WALL_CLOCK = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{1,2}:\d{2}(?::\d{2})?)")
_ISO_INSTANT = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})"
)
_TIME_ONLY = re.compile(r"(?<![\d:-])(\d{1,2}):(\d{2})(?::(\d{2}))?(?![\d:])")
_FIVE_HOURS = re.compile(r"5\s*(?:小时|hours?|h\b)", re.IGNORECASE)
_WEEK = re.compile(r"week|weekly|7\s*(?:天|days?)|周", re.IGNORECASE)
_MONTH = re.compile(r"month|monthly|月", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ToolAllowance:
    """The monthly tool-call allowance (`TIME_LIMIT`): calls used of the allowance."""

    used: int
    allowance: int
    resets_at: float | None


def window_name(unit: int, number: int) -> str | None:
    """The window a limit's `unit` and `number` describe: `5h`, `7d` (a week or seven
    days), `month`, else `<n>h`/`<n>d`; None for a unit GLM does not define."""
    seconds = _UNIT_SECONDS.get(unit)
    if seconds is None or number <= 0:
        return None
    if unit == 5:
        return "month" if number == 1 else f"{number}mo"
    length = seconds * number
    if length % 86400 == 0:
        return f"{length // 86400}d"
    return f"{length // 3600}h"


def read_glm_usage(body: bytes, *, now: float) -> PolledReading:
    """The plan's token windows from the quota endpoint's body, account-wide.

    A window not yet started (no `nextResetTime`) reads as used as it says with no reset,
    which the board keeps as fresh until the next poll. An error envelope reads as nothing.
    """
    data = _data(body)
    windows: dict[str, QuotaWindow] = {}
    for limit in json_values.array(data.get("limits")):
        entry = json_values.mapping(limit)
        if entry.get("type") != "TOKENS_LIMIT":
            continue
        window = _token_window(entry, now)
        if window is not None:
            held = windows.get(window.name)
            if held is None or (window.used_percent or 0.0) > (held.used_percent or 0.0):
                windows[window.name] = window
    return PolledReading(tuple(windows.values()))


def read_glm_tools(body: bytes, *, now: float) -> ToolAllowance | None:
    """The monthly tool-call allowance (`TIME_LIMIT`), or None when the body has none."""
    for limit in json_values.array(_data(body).get("limits")):
        entry = json_values.mapping(limit)
        if entry.get("type") != "TIME_LIMIT":
            continue
        allowance = _count(entry.get("usage"))
        used = _count(entry.get("currentValue"))
        remaining = _count(entry.get("remaining"))
        if used is None and allowance is not None and remaining is not None:
            used = allowance - remaining
        if allowance is None or used is None:
            return None
        return ToolAllowance(used, allowance, _epoch_ms(entry.get("nextResetTime"), now))
    return None


def glm_plan_name(body: bytes) -> str | None:
    """The plan's name (`planName`, else `level`), or None."""
    data = _data(body)
    for key in ("planName", "level"):
        name = data.get(key)
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None


def _token_window(entry: dict[str, Any], now: float) -> QuotaWindow | None:
    unit, number = json_values.whole(entry.get("unit")), json_values.whole(entry.get("number"))
    name = None if unit is None or number is None else window_name(unit, number)
    used = _percent(entry.get("percentage"))
    if name is None or used is None:
        return None
    return QuotaWindow(
        name=name,
        used_percent=min(100.0, max(0.0, used)),
        resets_at=_epoch_ms(entry.get("nextResetTime"), now),
        checked_at=now,
        status=WindowStatus.REJECTED if used >= 100 else WindowStatus.ALLOWED,
        source="poll",
    )


def glm_error_code(body: bytes) -> tuple[str, str]:
    """The business code and message of a GLM error body (empty strings when absent)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "", ""
    error = json_values.mapping(json_values.mapping(parsed).get("error"))
    code, message = error.get("code"), error.get("message")
    code_text = str(code) if isinstance(code, int | str) and not isinstance(code, bool) else ""
    return code_text.strip(), message if isinstance(message, str) else ""


def read_glm_error(status: int, body: bytes, *, now: float) -> ErrorSignal:
    """What a GLM 429 says: a spent window until its reset, an ended plan, or a throttle."""
    if status != 429:
        return NO_SIGNAL
    code, message = glm_error_code(body)
    if code in ENDED_CODES:
        return ErrorSignal(terminal=True)
    if code not in SPENT_CODES:
        # 1302/1305, and a plain 429 without a code: a short throttle, not the plan's window.
        return NO_SIGNAL
    reset = glm_reset(message, now=now)
    window = QuotaWindow(
        name=_spent_window_name(code, message),
        used_percent=100.0,
        resets_at=reset,
        checked_at=now,
        status=WindowStatus.REJECTED,
        source="error",
    )
    return ErrorSignal((window,), None if reset is None else reset - now, terminal=True)


def glm_reset(message: str, *, now: float) -> float | None:
    """The reset a GLM quota message names, as an epoch instant.

    An ISO instant with its offset is read as written; a date and time without one is
    UTC+8 wall-clock time ("2026-08-25 07:41:44" is 23:41:44 UTC the day before); a time
    alone is its next occurrence in UTC+8, on the next day once today's has passed.
    """
    iso = _ISO_INSTANT.search(message)
    if iso is not None:
        return parse_reset(iso.group(0), now=now)
    wall = _WALL_CLOCK.search(message)
    if wall is not None:
        clock = wall.group(2) if wall.group(2).count(":") == 2 else f"{wall.group(2)}:00"
        try:
            local = datetime.fromisoformat(f"{wall.group(1)}T{clock.zfill(8)}")
        except ValueError:
            return None
        return max(now, local.replace(tzinfo=CHINA_TIME).timestamp())
    alone = _TIME_ONLY.search(message)
    if alone is None:
        return None
    hour, minute, second = int(alone.group(1)), int(alone.group(2)), int(alone.group(3) or 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    today = datetime.fromtimestamp(now, CHINA_TIME)
    at = today.replace(hour=hour, minute=minute, second=second, microsecond=0)
    if at.timestamp() <= now:
        at += timedelta(days=1)
    return at.timestamp()


def _spent_window_name(code: str, message: str) -> str:
    named = _CODE_WINDOWS.get(code)
    if named is not None:
        return named
    if _FIVE_HOURS.search(message):
        return "5h"
    if _WEEK.search(message):
        return "7d"
    if _MONTH.search(message):
        return "month"
    return "usage"


def _data(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    envelope = json_values.mapping(parsed)
    if envelope.get("success") is False:
        return {}
    return json_values.mapping(envelope.get("data"))


def _percent(value: Any) -> float | None:
    # `percentage` is a number, or a numeric string in some answers.
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    number = json_values.number(value)
    return number if number is not None and math.isfinite(number) else None


def _count(value: Any) -> int | None:
    number = _percent(value)
    return None if number is None else int(number)


def _epoch_ms(value: Any, now: float) -> float | None:
    number = json_values.number(value)
    if number is None or number <= 0 or not math.isfinite(number):
        return None
    return max(now, number / 1000.0)
