"""The answer when every route of a request has failed."""

from __future__ import annotations

from collections.abc import Sequence

from rungway.engine.call import Refusal
from rungway.engine.planning import Plan
from rungway.engine.record import Attempt
from rungway.protocol.failures import FailureClass
from rungway.routing.autoid import Ladder

GIVE_UP_STATUS = {
    FailureClass.RATE_LIMITED: 429,
    FailureClass.QUOTA_EXHAUSTED: 429,
    FailureClass.BILLING: 402,
    FailureClass.AUTH: 502,
    FailureClass.MODEL_UNAVAILABLE: 404,
    FailureClass.OVERLOADED: 503,
    FailureClass.SERVER: 502,
    FailureClass.TIMEOUT: 504,
    FailureClass.NETWORK: 502,
    FailureClass.CONTEXT_TOO_LONG: 400,
    FailureClass.TERMS: 403,
}
"""The status a client gets when the last failure was of each class."""


def every_attempt_failed(
    attempts: Sequence[Attempt],
    plan: Plan,
    retry_after_s: float | None,
    now: float | None = None,
) -> Refusal:
    """One error naming each failed attempt; 429 with the earliest wait when every one was
    rate limited or out of quota: the soonest of the upstreams' waits and, given `now`,
    the reset of a plan connection the ladder skipped for its quota or a cooldown."""
    last = attempts[-1]
    kinds = {FailureClass(attempt.outcome) for attempt in attempts}
    if kinds <= {FailureClass.RATE_LIMITED, FailureClass.QUOTA_EXHAUSTED}:
        status = 429
    else:
        status = GIVE_UP_STATUS.get(FailureClass(last.outcome), 502)
    tried = "; ".join(
        f"{attempt.connection_id}: {attempt.outcome}"
        + (f" (HTTP {attempt.status})" if attempt.status else "")
        + (f" {attempt.detail}" if attempt.detail else "")
        for attempt in attempts
    )
    noun = "connection" if len(attempts) == 1 else f"all {len(attempts)} connections"
    message = f"{noun} serving {plan.resolution.resolved!r} failed: {tried}"
    code = f"upstream_{last.outcome}"
    if plan.route_plan.ladder is Ladder.SUBSCRIPTION:
        # Every verified plan connection failed at run time: still never a paid fallback.
        code = "subscription_unavailable"
    if status != 429:
        return Refusal(status, message, code=code)
    reset = plan.route_plan.earliest_reset
    if now is not None and reset is not None and reset > now:
        plan_wait = max(1.0, reset - now)
        retry_after_s = plan_wait if retry_after_s is None else min(retry_after_s, plan_wait)
    if retry_after_s is not None:
        # Said in the message too: a client told not to retry reads the moment here.
        message += f"; retry after {max(1.0, retry_after_s):.0f}s"
    return Refusal(status, message, code=code, retry_after_s=retry_after_s)
