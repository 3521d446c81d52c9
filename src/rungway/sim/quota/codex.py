"""A ChatGPT plan's quota as Codex sees it: the `x-codex-*` headers and the plan 429.

Formats follow docs/provider-signals.md A4.3 (headers: float percents, whole minutes,
epoch-second resets that may be `""`, `True`/`False` booleans) and A4.5 (the
`usage_limit_reached` body). The plan's first two account-wide windows, in scenario
order, are `primary` and `secondary`; a missing secondary is reported the way the
recorded Pro response reports it (0 minutes, an empty reset).
"""

from __future__ import annotations

import math

import orjson

from rungway.sim.exchange import Header, Reply
from rungway.sim.quota.windows import Admission, WindowReading
from rungway.sim.scenario import CodexSpec

PREFIX = "x-codex-"
# Codex answers every limit family it meters; the sim meters only the plan's own.
ACTIVE_LIMIT = "codex"


def subscription_windows(
    readings: tuple[WindowReading, ...] | list[WindowReading],
) -> tuple[WindowReading | None, WindowReading | None]:
    """The primary and secondary windows: the first two that apply to every model."""
    shared = [reading for reading in readings if reading.spec.model is None]
    primary = shared[0] if shared else None
    secondary = shared[1] if len(shared) > 1 else None
    return primary, secondary


def used_percent(reading: WindowReading) -> float:
    """Percent of the window used, 0..100, to one decimal rounded down.

    Rounding down keeps `100.0` for a window that is really spent.
    """
    return min(1000, reading.used * 1000 // reading.capacity) / 10


def window_minutes(reading: WindowReading) -> int:
    """The window's nominal length in whole minutes (300 for 5 h, 10080 for 7 d)."""
    return math.ceil(reading.spec.length_s / 60)


def reset_after_s(reading: WindowReading, now: float) -> int:
    """Whole seconds until the window resets."""
    return max(0, math.ceil(reading.reset_at - now))


def _bool(value: bool) -> str:
    # Real responses spell booleans the Python way (A4.3).
    return "True" if value else "False"


def _window_headers(name: str, reading: WindowReading | None, now: float) -> list[tuple[str, str]]:
    if reading is None:
        # As in the recorded Pro response: no window, no reset, no reset-after.
        return [
            (f"{PREFIX}{name}-used-percent", "0.0"),
            (f"{PREFIX}{name}-window-minutes", "0"),
            (f"{PREFIX}{name}-reset-at", ""),
        ]
    return [
        (f"{PREFIX}{name}-used-percent", str(used_percent(reading))),
        (f"{PREFIX}{name}-window-minutes", str(window_minutes(reading))),
        (f"{PREFIX}{name}-reset-at", str(math.ceil(reading.reset_at))),
        (f"{PREFIX}{name}-reset-after-seconds", str(reset_after_s(reading, now))),
    ]


def codex_headers(admission: Admission, spec: CodexSpec) -> list[Header]:
    """`x-codex-*`: plan type, primary and secondary windows, credits, active limit."""
    primary, secondary = subscription_windows(admission.readings)
    credits = spec.credits
    headers = [
        (f"{PREFIX}plan-type", spec.plan_type),
        (f"{PREFIX}active-limit", ACTIVE_LIMIT),
        *_window_headers("primary", primary, admission.now),
        *_window_headers("secondary", secondary, admission.now),
        (f"{PREFIX}credits-has-credits", _bool(credits.has_credits)),
        (f"{PREFIX}credits-unlimited", _bool(credits.unlimited)),
        (f"{PREFIX}credits-balance", credits.balance),
    ]
    return [(name.encode(), value.encode()) for name, value in headers]


def usage_limit_reply(admission: Admission, spec: CodexSpec) -> Reply:
    """The 429 `usage_limit_reached` of an exhausted plan window (A4.5)."""
    blocking = admission.rejected or admission.readings
    # The same instant as the exhausted window's `reset-at` header.
    resets_at = math.ceil(max((r.reset_at for r in blocking), default=admission.now + 1))
    minutes = max(1, math.ceil((resets_at - admission.now) / 60))
    message = (
        f"You have hit your ChatGPT usage limit ({spec.plan_type} plan). "
        f"Try again in ~{minutes} min."
    )
    error = {
        "type": "usage_limit_reached",
        "message": message,
        "plan_type": spec.plan_type,
        "resets_at": resets_at,
    }
    return Reply(429, orjson.dumps({"error": error}))
