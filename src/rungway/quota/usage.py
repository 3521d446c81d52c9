"""Readers of plan usage endpoints: polled readings, as opposed to passive header readings.

Claude's OAuth usage endpoint reports percent used (0..100, not a fraction) and ISO-8601
resets (provider-signals.md A2.5). Only the account-wide windows are taken from it: its
per-model keys are codenames that do not name a model id, so per-model windows come from
the response headers of requests to that model instead.
"""

from __future__ import annotations

from typing import Any

import orjson

from rungway.quota.resets import parse_reset
from rungway.routing.snapshot import QuotaWindow, WindowStatus

_FLAT = {"five_hour": "5h", "seven_day": "7d"}
_LIMIT_KINDS = {"session": "5h", "weekly_all": "7d"}


def read_claude_usage(body: bytes, *, now: float) -> tuple[QuotaWindow, ...]:
    """The 5h and 7d windows of a Claude plan from its usage endpoint's body."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ()
    if not isinstance(data, dict):
        return ()
    windows: dict[str, QuotaWindow] = {}
    for key, name in _FLAT.items():
        window = _window(name, data.get(key), now)
        if window is not None:
            windows[name] = window
    # The newer shape's `limits[]` list wins where it is present.
    for limit in data.get("limits") or ():
        if isinstance(limit, dict) and limit.get("kind") in _LIMIT_KINDS:
            name = _LIMIT_KINDS[limit["kind"]]
            window = _window(name, limit, now)
            if window is not None:
                windows[name] = window
    return tuple(windows.values())


def _window(name: str, entry: Any, now: float) -> QuotaWindow | None:
    if not isinstance(entry, dict):
        return None
    used = next((entry[k] for k in ("utilization", "percent", "percentage") if k in entry), None)
    if isinstance(used, bool) or not isinstance(used, int | float):
        return None
    resets = entry.get("resets_at") or entry.get("resetsAt")
    resets_at = parse_reset(resets, now=now) if isinstance(resets, str) else None
    status = WindowStatus.REJECTED if used >= 100 else WindowStatus.ALLOWED
    return QuotaWindow(name, float(used), resets_at, now, status=status, source="poll")
