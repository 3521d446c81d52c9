"""One more attempt on the same route, when a failure says what would make it succeed.

- A refusal that names the model's output limit: the same request within that limit
  (see `output_limit.py`).
- A 401 on a renewable login: the same request with the renewed token, once.

The second attempt holds its own budget in place of the first's, priced from the body it
sends, so a smaller output limit holds less; one that no longer fits says so (`Shortfall`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol, TypeVar

from pydantic import SecretStr

from rungway.budget import BudgetUnavailable, Shortfall
from rungway.engine.call import Call, Outcome
from rungway.engine.output_limit import output_limit_in, within_output_limit
from rungway.engine.planning import Route
from rungway.engine.translation import Translation
from rungway.protocol.failures import Failure, FailureClass


class Trail(Protocol):
    """The part of a request's trail a second try reads and, for its duration, changes."""

    translation: Translation | None


T = TypeVar("T", bound=Trail)
Attempted = Outcome | Failure | Shortfall | BudgetUnavailable
"""What one attempt ends in: an answer, a failure, or a hold its budget could not take (or
could not check)."""


async def second_try(
    call: Call,
    route: Route,
    trail: T,
    failure: Failure,
    *,
    sent: SecretStr | None,
    attempt: Callable[[Call, Route, T], Awaitable[Attempted]],
) -> Attempted:
    """The failure, or the outcome of one more attempt when the failure allows it."""
    if failure.kind is FailureClass.BAD_REQUEST:
        return await _within_output_limit(call, route, trail, failure, attempt)
    source = route.connection.source
    if failure.kind is not FailureClass.AUTH or source is None:
        return failure
    # A renewable login's token may just have expired: renew it and retry once.
    problem = await source.refresh_after_unauthorized(sent)
    if problem is not None:
        return replace(failure, message=f"{problem}; upstream: {failure.message}")
    return await attempt(call, route, trail)


async def _within_output_limit(
    call: Call,
    route: Route,
    trail: T,
    failure: Failure,
    attempt: Callable[[Call, Route, T], Awaitable[Attempted]],
) -> Attempted:
    limit = output_limit_in(failure.message)
    translation = trail.translation
    if limit is None:
        return failure
    if route.adapter.api is call.api or translation is None:
        smaller = within_output_limit(call, limit)
        return failure if smaller is None else await attempt(smaller, route, trail)
    asked = translation.request.max_tokens
    if asked is not None and asked <= limit:
        return failure
    trail.translation = translation.limited(limit)
    try:
        return await attempt(call, route, trail)
    finally:
        trail.translation = translation
