"""How long a connection rests after a failure: exponential backoff, upstream hints first.

A wait the upstream names (`Retry-After`, a reset header, `retryDelay`) is honoured for every
auth type. A cooldown caused by quota exhaustion is clamped to the window's own reset
instant: the plan is usable again the moment it resets, however far the backoff had grown.
The clamp only ever shortens.
"""

from __future__ import annotations

from dataclasses import dataclass

from rungway.protocol.failures import FailureClass


@dataclass(frozen=True, slots=True)
class CooldownPolicy:
    """Base delays and caps per kind of failure, in seconds."""

    base_s: float = 2.0
    max_s: float = 300.0
    quota_base_s: float = 60.0
    quota_max_s: float = 4 * 3600.0
    billing_s: float = 3600.0
    auth_s: float = 600.0


_RESTING = frozenset(
    {
        FailureClass.RATE_LIMITED,
        FailureClass.QUOTA_EXHAUSTED,
        FailureClass.BILLING,
        FailureClass.AUTH,
        FailureClass.OVERLOADED,
    }
)
"""Failures that rest the connection; server errors and timeouts go to the breaker instead."""


def clamp_to_reset(cooldown_until: float, resets_at: float | None, now: float) -> float:
    """`cooldown_until`, brought forward to `resets_at` when that comes first; never later."""
    if resets_at is None or resets_at <= now:
        return cooldown_until
    return min(cooldown_until, resets_at)


def cooldown_until(
    kind: FailureClass,
    *,
    level: int,
    now: float,
    retry_after_s: float | None,
    resets_at: float | None,
    policy: CooldownPolicy,
) -> float | None:
    """When the connection may be tried again after `kind`, or None when it need not rest.

    `level` is how many failures in a row came before this one (0 for the first).
    """
    if kind not in _RESTING:
        return None
    if kind is FailureClass.BILLING:
        return now + (retry_after_s if retry_after_s is not None else policy.billing_s)
    if kind is FailureClass.AUTH:
        return now + policy.auth_s
    if kind is FailureClass.QUOTA_EXHAUSTED:
        backoff = min(policy.quota_base_s * 2.0**level, policy.quota_max_s)
        until = now + backoff if retry_after_s is None else now + retry_after_s
        # The window's reset is the upstream's own word: the plan returns then, not later.
        return clamp_to_reset(until, resets_at, now)
    if retry_after_s is not None:
        return now + retry_after_s
    return now + min(policy.base_s * 2.0**level, policy.max_s)
