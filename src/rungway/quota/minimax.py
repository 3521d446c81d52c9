"""The MiniMax Token Plan's quota endpoints (docs/provider-signals.md, MiniMax Token Plan).

`GET /v1/token_plan/remains` and the older `GET /v1/api/openplatform/coding_plan/remains`
answer the same `model_remains[]` rows: per model family, a short window (5 hours for
text) and a weekly one, timed by epoch-millisecond `start_time`/`end_time` pairs and
`remains_time`, the milliseconds left until the reset. Since mid-2026 text quota is the
row `general`, its counts are zero and `*_remaining_percent` (0-100, what is left) is the
signal; older rows are named `MiniMax-M*` and carry counts only. The two endpoints give
`*_usage_count` opposite meanings: used on `token_plan`, remaining on `coding_plan`, as
one account read from both at once shows. `*_status` 3 marks an unlimited window.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from rungway.protocol import json_values
from rungway.quota.headers import codex_window_name
from rungway.quota.usage import PolledReading
from rungway.routing.snapshot import QuotaWindow, WindowStatus

TOKEN_PLAN_PATH = "/v1/token_plan/remains"
CODING_PLAN_PATH = "/v1/api/openplatform/coding_plan/remains"
_UNLIMITED = 3
_TEXT_ROWS = ("general", "minimax-m")
# (window name when its times say nothing, prefix of its figures, prefix of its times)
_SLOTS = (("5h", "current_interval", ""), ("7d", "current_weekly", "weekly_"))


def read_minimax_remains(body: bytes, *, now: float, counts_remaining: bool) -> PolledReading:
    """The text model's 5h and weekly windows from a `remains` body.

    `counts_remaining` says the body came from `coding_plan/remains`, whose usage counts
    are what is left. A body whose `base_resp.status_code` is not 0 (1004: no plan or
    not authorised; 2049: invalid key) says nothing about the windows.
    """
    data = _json_object(body)
    status = json_values.mapping(data.get("base_resp")).get("status_code", 0)
    if status != 0:
        return PolledReading()
    rows = [json_values.mapping(row) for row in json_values.array(data.get("model_remains"))]
    text = next((row for row in rows if _is_text(row.get("model_name"))), None)
    if text is None:
        return PolledReading()
    windows = []
    for slot in _SLOTS:
        window = _window(text, slot, now=now, counts_remaining=counts_remaining)
        if window is not None:
            windows.append(window)
    # Past its quota the plan refuses until the reset: pay-as-you-go is another key.
    return PolledReading(tuple(windows), False if windows else None)


def minimax_error_code(message: str) -> int | None:
    """The MiniMax code a message ends with, `... (2056)`; None when it has none."""
    text = message.rstrip()
    if not text.endswith(")"):
        return None
    opening = text.rfind("(")
    digits = text[opening + 1 : -1]
    return int(digits) if opening >= 0 and digits.isdigit() else None


def _is_text(name: object) -> bool:
    return isinstance(name, str) and name.strip().lower().startswith(_TEXT_ROWS)


def _window(
    row: dict[str, Any], slot: tuple[str, str, str], *, now: float, counts_remaining: bool
) -> QuotaWindow | None:
    default, fields, times = slot
    if row.get(f"{fields}_status") == _UNLIMITED:
        used: float | None = 0.0
    else:
        used = _used_percent(row, fields, counts_remaining)
    if used is None:
        return None
    start, end = _number(row.get(f"{times}start_time")), _number(row.get(f"{times}end_time"))
    name = default
    if start is not None and end is not None and end > start:
        name = codex_window_name(round((end - start) / 60_000))
    left_ms = _number(row.get(f"{times}remains_time"))
    resets_at = now + left_ms / 1000 if left_ms is not None and left_ms >= 0 else None
    if resets_at is None and end is not None and end > 0:
        resets_at = max(now, end / 1000)
    return QuotaWindow(
        name=name,
        used_percent=min(100.0, max(0.0, used)),
        resets_at=resets_at,
        checked_at=now,
        status=WindowStatus.REJECTED if used >= 100 else WindowStatus.ALLOWED,
        source="poll",
    )


def _used_percent(row: dict[str, Any], fields: str, counts_remaining: bool) -> float | None:
    left = _number(row.get(f"{fields}_remaining_percent"))
    if left is not None:
        return 100.0 - left
    total = _number(row.get(f"{fields}_total_count"))
    count = _number(row.get(f"{fields}_usage_count"))
    if total is None or count is None or total <= 0:
        # The newest rows zero their counts: a zero total with no percent says nothing.
        return None
    used = total - count if counts_remaining else count
    return 100.0 * used / total


def _number(value: object) -> float | None:
    number = json_values.number(value)
    return number if number is not None and math.isfinite(number) else None


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        return json_values.mapping(orjson.loads(body))
    except orjson.JSONDecodeError:
        return {}
