"""Which limit a refusal hit: a per-minute throttle, a spent plan window, a spent budget,
or a 429/529 that says nothing (`LimitKind`).

The kind is read from what the adapter already decided (a `Failure`'s class and wait) or
from a quota error's evidence (`ErrorSignal.limit`), and travels as text: the board's
cooldown reason reads `rate_limited (throttle): ...` and the ledger's attempt detail
`throttle: ...`, which `explain`, `status` and the admin view read back with
`limit_of_detail`. Reading it costs a few comparisons, on failures only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from rungway.protocol.failures import Failure, FailureClass
from rungway.routing.snapshot import QuotaWindow

LONGEST_THROTTLE_S: Final = 300.0
"""A wait past five minutes is no retry but a spent window (provider-signals A6.2, rule 4:
the first-party Gemini CLI's own line)."""


class LimitKind(StrEnum):
    """Which limit a refusal (an upstream's 429, 529 or 402, or the gateway's own) hit.

    What to do about it differs: a throttle passes within a minute, a spent window at its
    reset (hours, days), a spent budget at its period's end or never without money, and an
    unexplained refusal says nothing, so it gets the ordinary backoff.
    """

    THROTTLE = "throttle"
    """A per-minute (or per-second) rate limit: requests or tokens per minute."""
    WINDOW = "window"
    """A spent plan window: 5-hour, weekly, daily, or any other period the plan counts."""
    BUDGET = "budget"
    """Spent money: the upstream's credits, or a budget of the gateway's own."""
    UNEXPLAINED = "unexplained"
    """A 429 or 529 that names no limit and no wait: overload, or a limit it keeps quiet."""

    @property
    def meaning(self) -> str:
        """The kind in words, for `explain` and `status`."""
        return _MEANINGS[self]


_MEANINGS = {
    LimitKind.THROTTLE: "a per-minute throttle: it passes within the minute",
    LimitKind.WINDOW: "a spent plan window (5-hour, weekly or other): usable at its reset",
    LimitKind.BUDGET: "a spent budget or credit: usable when the period ends or money is added",
    LimitKind.UNEXPLAINED: "a 429/529 naming no limit or wait: backed off and tried again",
}
_WINDOW_FAILURES = frozenset({FailureClass.QUOTA_EXHAUSTED})
_LIMIT_FAILURES = frozenset(
    {FailureClass.RATE_LIMITED, FailureClass.QUOTA_EXHAUSTED, FailureClass.BILLING}
)


def limit_kind(failure: Failure) -> LimitKind | None:
    """The limit a failed attempt hit, from its class and wait hint; None for a failure
    that is no limit (a server error, a bad request)."""
    kind = failure.kind
    if kind in _LIMIT_FAILURES:
        if kind in _WINDOW_FAILURES:
            return LimitKind.WINDOW
        if kind is FailureClass.BILLING:
            return LimitKind.BUDGET
        wait = failure.retry_after_s
        if wait is None:
            return LimitKind.UNEXPLAINED
        # A "rate limit" that lasts past a retry's length is a spent window in all but name.
        return LimitKind.THROTTLE if wait <= LONGEST_THROTTLE_S else LimitKind.WINDOW
    if kind is FailureClass.OVERLOADED and failure.status in (429, 529):
        return LimitKind.UNEXPLAINED
    return None


def limit_detail(failure: Failure) -> str:
    """The failure's message as the ledger keeps it: led by its limit kind when it hit one
    (`window: ...`), so that `explain` and the admin view can tell the limits apart."""
    limit = limit_kind(failure)
    message = failure.message[:300]
    return message if limit is None else f"{limit.value}: {message}"


def limit_of_detail(detail: str) -> LimitKind | None:
    """The limit kind a ledger detail or cooldown reason written by `limit_detail` leads with."""
    head, sep, _ = detail.partition(": ")
    if not sep:
        return None
    head = head.rsplit(" ", 1)[-1].strip("[]()")
    try:
        return LimitKind(head)
    except ValueError:
        return None


_THROTTLE_WINDOWS = frozenset({"1m", "requests", "rpm", "tpm"})
"""Window names that count per minute: spending one is a throttle, not a plan window."""


def throttles(window: QuotaWindow) -> bool:
    """True when spending `window` is a throttle: it is back within a retry's length."""
    # A window back within a retry's length is a throttle whatever its name (OpenRouter's
    # `requests` is per minute on one model and per day on another); one without a reset
    # is judged by its name.
    if window.resets_at is not None:
        return window.resets_at - window.checked_at <= LONGEST_THROTTLE_S
    return window.name in _THROTTLE_WINDOWS
