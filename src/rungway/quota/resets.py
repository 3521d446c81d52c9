"""Turn the many spellings of "when does this window reset" into one epoch instant.

Upstreams write reset instants as epoch seconds or milliseconds, relative seconds, Go and
protobuf durations, RFC 3339 timestamps, bare dates and HTTP-dates (docs/provider-signals.md
A9 lists where each appears). `parse_reset` accepts all of them and anchors relative values
at `now`, the instant the response was received, never at parse time (A9 step 7).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

# A9 step 3, extended with Go's sub-millisecond units: `time.Duration.String()` prints
# `1.5µs` and `100ns` for tiny values, and a bucket that refills that fast can report one.
# `m(?!s)` keeps the minutes group from eating the `m` of `ms`.
_DURATION = re.compile(
    r"(?:(?P<h>\d+(?:\.\d+)?)h)?"
    r"(?:(?P<m>\d+(?:\.\d+)?)m(?!s))?"
    r"(?:(?P<s>\d+(?:\.\d+)?)s)?"
    r"(?:(?P<ms>\d+(?:\.\d+)?)ms)?"
    r"(?:(?P<us>\d+(?:\.\d+)?)(?:us|µs|μs))?"
    r"(?:(?P<ns>\d+(?:\.\d+)?)ns)?"
)
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}

# A9 step 2: at or above 1e12 an epoch is in milliseconds (1e12 s is the year 33658), at or
# above 1e9 it is in seconds (September 2001 on). Anything smaller in an absolute field is
# an upstream sending a delta where an instant belongs.
_EPOCH_MS = 1e12
_EPOCH_S = 1e9


def parse_duration(text: str) -> float | None:
    """Seconds in a Go or protobuf duration (`6m0s`, `12ms`, `0.847655010s`), else None.

    A bare number has no unit and is not a duration; `parse_reset` handles numbers.
    """
    value = text.strip()
    if not value:
        return None
    match = _DURATION.fullmatch(value)
    if match is None:
        return None
    return sum(
        float(amount) * _UNIT_SECONDS[unit]
        for unit, amount in match.groupdict().items()
        if amount is not None
    )


def parse_reset(value: str, *, now: float, relative: bool = False) -> float | None:
    """The epoch instant (seconds) a reset value names, or None when it names none.

    `relative` marks fields that are deltas by definition (`retry-after`,
    `*-reset-after-seconds`, `resets_in_seconds`, `x-ratelimit-reset-*`). An instant already
    in the past comes back as `now`: the window it described is over, and a reading whose
    reset has passed is stale whatever its age (A9 step 5).
    """
    text = value.strip()
    if not text:
        # Codex sends `x-codex-secondary-reset-at: ""` for an absent window (A4.3).
        return None
    instant = _instant(text, now=now, relative=relative)
    if instant is None or not math.isfinite(instant):
        return None
    return max(instant, now)


def _instant(text: str, *, now: float, relative: bool) -> float | None:
    if _NUMBER.fullmatch(text):
        number = float(text)
        if relative:
            return now + number
        if number >= _EPOCH_MS:
            return number / 1000.0
        if number >= _EPOCH_S:
            return number
        # A9 step 2: a small number in an absolute field is a delta sent by mistake.
        return now + number
    duration = parse_duration(text)
    if duration is not None:
        return now + duration
    return _timestamp(text)


def _timestamp(text: str) -> float | None:
    # RFC 3339 with `Z`, an offset or fractional seconds (Anthropic API-key headers, A1),
    # and `YYYY-MM-DD`, which means 00:00 UTC (Copilot `quota_reset_date`, A9). Python
    # 3.11's `fromisoformat` reads both; a value without an offset is taken as UTC.
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        pass
    else:
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    # HTTP-date, which RFC 9110 allows in `Retry-After` (A9).
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
