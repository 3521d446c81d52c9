"""One more attempt on the same route, when a failure says what would make it succeed.

- A refusal that names the model's output limit: the same request within that limit
  (see `output_limit.py`).
- A 401 on a renewable login: the same request with the renewed token, once.

The second attempt holds its own budget in place of the first's, priced from the body it
sends, so a smaller output limit holds less; one that no longer fits says so (`Shortfall`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import SecretStr

from rungway.budget import BudgetUnavailable, Shortfall
from rungway.engine.call import Call, Outcome
from rungway.engine.output_limit import output_limit_in, within_output_limit
from rungway.engine.planning import Route
from rungway.engine.translation import Translation
from rungway.protocol.failures import Failure, FailureClass

Attempted = Outcome | Failure | Shortfall | BudgetUnavailable
"""What one attempt ends in: an answer, a failure, or a hold its budget could not take (or
could not check)."""


@dataclass(frozen=True, slots=True)
class Retry:
    """One more attempt on the same route: the request and translation it sends."""

    call: Call
    translation: Translation | None


async def second_try(
    call: Call,
    route: Route,
    translation: Translation | None,
    failure: Failure,
    *,
    sent: SecretStr | None,
) -> Retry | Failure:
    """What to send in one more attempt, when the failure allows one; else the failure.

    A renewable login is renewed here, before the retry is returned.
    """
    if failure.kind is FailureClass.BAD_REQUEST:
        return _within_output_limit(call, route, translation, failure)
    source = route.connection.source
    if failure.kind is not FailureClass.AUTH or source is None:
        return failure
    # A renewable login's token may just have expired: renew it and retry once.
    problem = await source.refresh_after_unauthorized(sent)
    if problem is not None:
        return replace(failure, message=f"{problem}; upstream: {failure.message}")
    return Retry(call, translation)


def _within_output_limit(
    call: Call, route: Route, translation: Translation | None, failure: Failure
) -> Retry | Failure:
    limit = output_limit_in(failure.message)
    if limit is None:
        return failure
    if route.adapter.api is call.api or translation is None:
        smaller = within_output_limit(call, limit)
        return failure if smaller is None else Retry(smaller, translation)
    asked = translation.request.max_tokens
    if asked is not None and asked <= limit:
        return failure
    return Retry(call, translation.limited(limit))
