"""Antigravity's quota, read from Cloud Code's two answers that carry it.

- `POST {base}:retrieveUserQuota` with `{"project"}`: `{"buckets": [{"modelId",
  "remainingFraction", "resetTime"}]}`, the consumption signal two open gateways read first.
- `POST {base}:fetchAvailableModels`: `{"models": {"<id>": {"quotaInfo":
  {"remainingFraction", "resetTime"}}}}`, which one of them calls catalog data that may keep
  reporting full buckets after use; it fills in only models the first answer lacks.

Each model's bucket is a window named `quota`, scoped to the model, as a 429 naming the
model's `QUOTA_EXHAUSTED` is (`quota/errors.py`), so a polled reading and an error reading
of one bucket are one window. Antigravity omits `remainingFraction` of a spent bucket: an
absent fraction is 0 left, never unlimited; a fraction of 1 or more without a `resetTime`
is a bucket without a limit (the editor's tab models), which is no window. Whether a bucket
spans five hours or a day is not said; its `resetTime` is what counts.
"""

from __future__ import annotations

from typing import Any

import orjson

from rungway.protocol import json_values
from rungway.quota.resets import parse_reset
from rungway.quota.usage import PolledReading
from rungway.routing.snapshot import QuotaWindow, WindowStatus

WINDOW = "quota"


def read_antigravity_quota(
    body: bytes, *, now: float, credits: bool | None = None, fallback: bytes = b""
) -> PolledReading:
    """The per-model windows of `retrieveUserQuota`'s `body`, filled in from a
    `fetchAvailableModels` `fallback` body for models it does not name; `credits` says
    whether use past them is paid from AI credits (None: not known yet)."""
    windows: dict[str, QuotaWindow] = {}
    for bucket in json_values.array(_object(body).get("buckets")):
        entry = json_values.mapping(bucket)
        model = entry.get("modelId")
        if isinstance(model, str) and model.strip():
            _keep(windows, model.strip(), entry, now)
    models = json_values.mapping(_object(fallback).get("models")) if fallback else {}
    for model, info in models.items():
        if model not in windows:
            quota = json_values.mapping(json_values.mapping(info).get("quotaInfo"))
            if quota:
                _keep(windows, model, quota, now)
    return PolledReading(tuple(windows.values()), credits)


def _keep(windows: dict[str, QuotaWindow], model: str, entry: dict[str, Any], now: float) -> None:
    window = _window(model, entry, now)
    held = windows.get(model)
    # Several buckets of one model: the tighter one stands for it.
    if window is not None and (held is None or _tightness(window) > _tightness(held)):
        windows[model] = window


def _window(model: str, entry: dict[str, Any], now: float) -> QuotaWindow | None:
    raw = entry.get("remainingFraction")
    reset = entry.get("resetTime")
    if raw is None:
        fraction = 0.0
    elif isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    else:
        fraction = min(max(float(raw), 0.0), 1.0)
    if fraction >= 1.0 and not reset:
        return None
    resets_at = parse_reset(reset, now=now) if isinstance(reset, str) else None
    used = (1.0 - fraction) * 100.0
    return QuotaWindow(
        name=WINDOW,
        used_percent=used,
        resets_at=resets_at,
        checked_at=now,
        model=model,
        # A fraction too small to leave anything once rounded is spent too.
        status=WindowStatus.REJECTED if used >= 100.0 else WindowStatus.ALLOWED,
        source="poll",
    )


def _tightness(window: QuotaWindow) -> tuple[float, float]:
    return (window.used_percent or 0.0, window.resets_at or 0.0)


def _object(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
