"""Read quota windows from the rate-limit headers an upstream sends on every response.

Each reader takes the response headers and `now` (the instant the response was received)
and returns the windows the headers describe, or `()` when they describe none. Header names
are case-insensitive; readers accept a case-insensitive multidict or a plain dict.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from rungway.quota.resets import parse_reset
from rungway.routing.snapshot import QuotaWindow, WindowStatus

# docs/provider-signals.md A2.3 gives `[a-z0-9_]+` for the claim; hyphens are allowed too because
# third-party captures also spell a model window `7d-sonnet` (A2.3, "Also reported").
_UNIFIED = re.compile(
    r"anthropic-ratelimit-unified-(?P<claim>[a-z0-9_-]+?)-"
    r"(?P<field>status|reset|utilization|surpassed-threshold)"
)
_UNIFIED_PREFIX = "anthropic-ratelimit-unified-"
# A2.3: pay-as-you-go overage and its routing hints describe billing, not a plan window.
_NOT_WINDOWS = ("overage", "fallback", "upgrade")
# A2.3: the session and weekly windows bind the whole account; any other claim (`7d_oi` on
# Fable requests, `7d_opus`, `7d_sonnet`) binds only the model it was reported for: a
# Fable-only rejection must not bench the whole account.
_ACCOUNT_WIDE = frozenset({"5h", "7d"})
# `representative-claim` uses long names (A2.3); windows are named as the per-claim headers
# spell them.
_CLAIM_PREFIXES = (("five_hour", "5h"), ("seven_day", "7d"))

_API_KEY_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
_X_RATELIMIT = re.compile(r"x-ratelimit-(?P<field>limit|remaining|reset)-(?P<name>[a-z0-9_-]+)")
_CODEX = re.compile(
    r"x-codex-(?:(?P<family>[a-z0-9_-]+?)-)?(?P<slot>primary|secondary)-"
    r"(?P<field>used-percent|window-minutes|reset-at|reset-after-seconds)"
)
_FIVE_HOURS_MIN = 300
_SEVEN_DAYS_MIN = 10_080
_OVERAGE_PREFIX = _UNIFIED_PREFIX + "overage-"
_OVERAGE_OPEN = frozenset({"allowed", "allowed_warning"})
_CREDITS_PREFIX = "x-codex-credits-"
_CODEX_SUBSCRIPTION_USED = ("x-codex-primary-used-percent", "x-codex-secondary-used-percent")
_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


@dataclass(frozen=True, slots=True)
class OverageReading:
    """What one response says about billing past the plan's quota.

    `permitted`: the account bills use past its windows (Claude's extra usage, Codex
    credits); None when the response does not say. `in_use`: this response itself was
    served past the plan's quota, so it is billed.
    """

    permitted: bool | None = None
    in_use: bool = False


NO_OVERAGE = OverageReading()
"""A response that says nothing about overage."""


def fold_headers(headers: Mapping[str, str], prefix: str = "") -> dict[str, str]:
    """The headers with lower-cased names (only those starting with `prefix`).

    The last of repeated names wins. Readers pass their family's prefix: a response carries
    a dozen other headers, and every response passes through a reader.
    """
    folded = {}
    for name, value in headers.items():
        lowered = name.lower()
        if lowered.startswith(prefix):
            folded[lowered] = value
    return folded


def read_anthropic_unified(
    headers: Mapping[str, str], *, model: str, now: float
) -> tuple[QuotaWindow, ...]:
    """Claude plan windows from `anthropic-ratelimit-unified-*` (docs/provider-signals.md A2.3).

    `model` is the model of the request that carried the headers: model-scoped claims such
    as `7d_oi` are recorded against it.
    """
    folded = fold_headers(headers, _UNIFIED_PREFIX)
    claims: dict[str, dict[str, str]] = {}
    for name, value in folded.items():
        match = _UNIFIED.fullmatch(name)
        if match is None or match["claim"].startswith(_NOT_WINDOWS):
            continue
        claims.setdefault(match["claim"], {})[match["field"]] = value
    _fill_representative(claims, folded)
    return tuple(
        _unified_window(claim, fields, model=model, now=now) for claim, fields in claims.items()
    )


def _fill_representative(claims: dict[str, dict[str, str]], folded: Mapping[str, str]) -> None:
    # The overall status and reset describe the representative (binding) claim. Responses
    # that carry only those still name an exhausted window (A2.3); when that claim also has
    # its own headers, they win and the overall values only fill gaps.
    status = folded.get(_UNIFIED_PREFIX + "status", "").strip()
    reset = folded.get(_UNIFIED_PREFIX + "reset", "").strip()
    if not status and not reset:
        return
    representative = folded.get(_UNIFIED_PREFIX + "representative-claim", "").strip().lower()
    if not representative and claims:
        return
    claim = _short_claim(representative) if representative else "unified"
    fields = claims.setdefault(claim, {})
    if status:
        fields.setdefault("status", status)
    if reset:
        fields.setdefault("reset", reset)


def _short_claim(claim: str) -> str:
    for long, short in _CLAIM_PREFIXES:
        if claim.startswith(long):
            return short + claim[len(long) :]
    return claim


def _unified_window(
    claim: str, fields: Mapping[str, str], *, model: str, now: float
) -> QuotaWindow:
    # A2.3: header utilization is a fraction (`0.05` = 5%), unlike the usage endpoint's
    # percent (A2.5); mixing the two is the classic bug (section 0, item 1).
    fraction = _number(fields.get("utilization"))
    used = None if fraction is None else _clamp_percent(fraction * 100.0)
    reset = fields.get("reset")
    status = _status(fields.get("status"), known_usage=used is not None)
    return QuotaWindow(
        name=claim,
        used_percent=used,
        resets_at=None if reset is None else parse_reset(reset, now=now),
        checked_at=now,
        model=None if claim in _ACCOUNT_WIDE or claim == "unified" else model,
        status=status,
    )


def _status(value: str | None, *, known_usage: bool) -> WindowStatus:
    if value is None or not value.strip():
        # No verdict from the upstream: a usage figure alone is judged by the gates' cut-off.
        return WindowStatus.ALLOWED if known_usage else WindowStatus.UNKNOWN
    try:
        # `allowed_warning` still admits requests (A2.3, section 0 item 2).
        return WindowStatus(value.strip().lower())
    except ValueError:
        return WindowStatus.UNKNOWN


def read_anthropic_overage(headers: Mapping[str, str]) -> OverageReading:
    """A Claude plan's extra usage from `anthropic-ratelimit-unified-overage-*` (A2.3).

    `overage-status` `allowed` (or `allowed_warning`) means requests past a spent window
    are served and billed as extra usage; `rejected` means they are refused (extra usage
    disabled, or its monthly limit spent). A response served as extra usage says so in
    `overage-in-use: true`, or, as the first-party client reads it, by an overall status of
    `rejected` while the overage status allows.
    """
    folded = fold_headers(headers, _OVERAGE_PREFIX)
    if not folded:
        return NO_OVERAGE
    status = folded.get(_OVERAGE_PREFIX + "status", "").strip().lower()
    in_use = _flag(folded.get(_OVERAGE_PREFIX + "in-use")) is True
    if not in_use and status in _OVERAGE_OPEN:
        overall = fold_headers(headers, _UNIFIED_PREFIX + "status")
        in_use = overall.get(_UNIFIED_PREFIX + "status", "").strip().lower() == "rejected"
    if in_use or status in _OVERAGE_OPEN:
        return OverageReading(True, in_use)
    return OverageReading(False) if status == "rejected" else NO_OVERAGE


def read_codex_credits(headers: Mapping[str, str]) -> OverageReading:
    """A ChatGPT plan's credits from `x-codex-credits-*` (A4.3).

    Credits (`has-credits`, or `unlimited`) pay for requests past a spent plan window, so
    an account holding them bills past its plan. A response served while a plan window
    reports 100% used was paid from credits.
    """
    folded = fold_headers(headers, "x-codex-")
    has = _flag(folded.get(_CREDITS_PREFIX + "has-credits"))
    unlimited = _flag(folded.get(_CREDITS_PREFIX + "unlimited"))
    if has is None and unlimited is None:
        return NO_OVERAGE
    if not (has or unlimited):
        return OverageReading(False)
    spent = any((_number(folded.get(name)) or 0.0) >= 100.0 for name in _CODEX_SUBSCRIPTION_USED)
    return OverageReading(True, spent)


def _flag(value: str | None) -> bool | None:
    # A4.3: real responses send `True`/`False`; `true/false/1/0` in any case are accepted.
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    return False if lowered in _FALSE else None


def read_anthropic_api_key(headers: Mapping[str, str], *, now: float) -> tuple[QuotaWindow, ...]:
    """Anthropic API-key buckets from `anthropic-ratelimit-{kind}-{limit,remaining,reset}` (A1).

    Resets are RFC 3339 and mark when the bucket is full again, not when a retry may succeed
    (A1: the bucket refills continuously; only `retry-after` is a wait hint).
    """
    folded = fold_headers(headers, "anthropic-ratelimit-")
    windows = []
    for kind in _API_KEY_LIMITS:
        prefix = f"anthropic-ratelimit-{kind}-"
        window = _bucket_window(
            kind,
            limit=folded.get(prefix + "limit"),
            remaining=folded.get(prefix + "remaining"),
            reset=folded.get(prefix + "reset"),
            relative=False,
            now=now,
        )
        if window is not None:
            windows.append(window)
    return tuple(windows)


def read_x_ratelimit(headers: Mapping[str, str], *, now: float) -> tuple[QuotaWindow, ...]:
    """Buckets from `x-ratelimit-{limit,remaining,reset}-<name>` (OpenAI, Groq, Cerebras).

    The window is named by the header suffix: `requests`, `tokens` (OpenAI, Groq: A3, A8),
    `requests-day`, `tokens-minute` (Cerebras: A8), `tokens_usage_based` (A3).
    """
    buckets: dict[str, dict[str, str]] = {}
    for name, value in fold_headers(headers, "x-ratelimit-").items():
        match = _X_RATELIMIT.fullmatch(name)
        if match is not None:
            buckets.setdefault(match["name"], {})[match["field"]] = value
    windows = []
    for name, fields in buckets.items():
        # A3/A8: resets are deltas, as Go durations (`6m0s`, `2m59.56s`) or, on Cerebras,
        # float seconds; each is time to full replenishment. Groq's `requests` bucket is per
        # day, not per minute (A8), which the reset instant already reflects.
        window = _bucket_window(
            name,
            limit=fields.get("limit"),
            remaining=fields.get("remaining"),
            reset=fields.get("reset"),
            relative=True,
            now=now,
        )
        if window is not None:
            windows.append(window)
    return tuple(windows)


def _bucket_window(
    name: str,
    *,
    limit: str | None,
    remaining: str | None,
    reset: str | None,
    relative: bool,
    now: float,
) -> QuotaWindow | None:
    total = _number(limit)
    left = _number(remaining)
    if total is None or left is None:
        return None
    used = _clamp_percent(100.0 * (1.0 - left / total)) if total > 0 else None
    return QuotaWindow(
        name=name,
        used_percent=used,
        resets_at=None if reset is None else parse_reset(reset, now=now, relative=relative),
        checked_at=now,
        status=WindowStatus.ALLOWED if used is not None else WindowStatus.UNKNOWN,
    )


def read_codex(headers: Mapping[str, str], *, now: float) -> tuple[QuotaWindow, ...]:
    """ChatGPT plan windows from `x-codex-*` headers (docs/provider-signals.md A4.3).

    Each window is named by its length (`5h`, `7d`, else `<n>m`), never by its primary or
    secondary slot. An extra metered family `x-codex-<family>-*` gets its family as a name
    prefix and is scoped to the model its `-limit-name` header names, when there is one.
    """
    folded = fold_headers(headers, "x-codex-")
    slots: dict[tuple[str, str], dict[str, str]] = {}
    for name, value in folded.items():
        match = _CODEX.fullmatch(name)
        if match is not None:
            key = (match["family"] or "", match["slot"])
            slots.setdefault(key, {})[match["field"]] = value
    windows = []
    for (family, slot), fields in sorted(slots.items()):
        window = _codex_window(family, slot, fields, folded, now=now)
        if window is not None:
            windows.append(window)
    return tuple(windows)


def _codex_window(
    family: str, slot: str, fields: Mapping[str, str], folded: Mapping[str, str], *, now: float
) -> QuotaWindow | None:
    used = _number(fields.get("used-percent"))
    if used is None:
        return None
    minutes_value = _number(fields.get("window-minutes"))
    minutes = None if minutes_value is None else int(minutes_value)
    # `reset-at` is epoch seconds and may be `""` (A4.3); older responses carry only the
    # delta `reset-after-seconds`, so fall back to it whenever `reset-at` names no instant.
    reset = parse_reset(fields.get("reset-at", ""), now=now)
    if reset is None:
        reset = parse_reset(fields.get("reset-after-seconds", ""), now=now, relative=True)
    # The first-party Codex client drops a slot that carries no data: nothing used, no
    # length and no reset (A4.3). Recorded Pro responses send such an empty secondary.
    if used == 0 and not minutes and reset is None:
        return None
    name = codex_window_name(minutes) if minutes else slot
    limit_name = folded.get(f"x-codex-{family}-limit-name", "").strip() if family else ""
    return QuotaWindow(
        name=f"{family}-{name}" if family else name,
        used_percent=_clamp_percent(used),
        resets_at=reset,
        checked_at=now,
        model=limit_name or None,
    )


def codex_window_name(minutes: int) -> str:
    """A Codex window named by its length: 300 -> `5h`, 10080 -> `7d`, else `<n>m` (A4.3)."""
    # The usage endpoint reports 17940 s and 604740 s, a minute short of 5 h and 7 d (A4.4),
    # so a length within 1% of either is that window.
    for length, name in ((_FIVE_HOURS_MIN, "5h"), (_SEVEN_DAYS_MIN, "7d")):
        if abs(minutes - length) <= length / 100:
            return name
    return f"{minutes}m"


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _clamp_percent(value: float) -> float:
    # An overdrawn bucket (remaining below 0) or a rounded figure can fall outside 0..100.
    return min(100.0, max(0.0, value))
