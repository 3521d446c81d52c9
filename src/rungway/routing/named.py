"""`gate_named`: a named model's plan, less the connections resting or disabled right now.

A named model's candidates are fixed (one per connection, in the order resolution gave), so
its plan is built once per name. What changes per request is each connection's state: one
an operator disabled, one cooling down after a 429 and one whose breaker is open are
skipped, so a spent plan is not asked again on every request; so is one whose plan's terms
do not allow the request's client. When every connection is left out, the plan has no
candidates and its `earliest_reset` says when the first resting one can serve again (None
when none rests).
"""

from __future__ import annotations

from collections.abc import Mapping

from rungway.routing.gates import resting_verdict
from rungway.routing.plan import RoutePlan, Skip, SkipReason
from rungway.routing.snapshot import BreakerState, ConnectionState

_RESTING = (SkipReason.COOLDOWN, SkipReason.BREAKER_OPEN)
_NONE: Mapping[str, Skip] = {}


def gate_named(
    plan: RoutePlan,
    states: Mapping[str, ConnectionState],
    now: float,
    kept_off: Mapping[str, Skip] = _NONE,
) -> RoutePlan:
    """`plan` itself when every connection may serve, else the plan without the others.

    `kept_off` holds the connections the request's client may not use (their terms, their
    bound client key), each with its skip (`routing.terms.TermsGate`)."""
    if not any(
        c.connection_ids[0] in kept_off or _resting(states.get(c.connection_ids[0]), now)
        for c in plan.candidates
    ):
        return plan
    kept = []
    skipped = list(plan.skipped)
    for candidate in plan.candidates:
        connection_id = candidate.connection_ids[0]
        terms = kept_off.get(connection_id)
        if terms is not None:
            skipped.append(terms._replace(model=candidate.model, rung=candidate.rung))
            continue
        state = states.get(connection_id)
        verdict = resting_verdict(state, now) if state is not None else None
        if verdict is None or verdict.passed:
            kept.append(candidate)
            continue
        assert verdict.reason is not None
        skipped.append(
            Skip(
                verdict.reason,
                verdict.detail,
                connection_id,
                candidate.model,
                candidate.rung,
                verdict.resets_at,
            )
        )
    ends = [
        skip.resets_at for skip in skipped if skip.reason in _RESTING and skip.resets_at is not None
    ]
    return RoutePlan(
        plan.requested,
        plan.ladder,
        plan.category,
        tuple(kept),
        tuple(skipped),
        earliest_reset=min(ends) if ends else None,
    )


def _resting(state: ConnectionState | None, now: float) -> bool:
    # The common case, a connection with no state or a healthy one, decided without a Verdict.
    return state is not None and (
        state.disabled
        or (state.cooldown_until is not None and state.cooldown_until > now)
        or state.breaker is BreakerState.OPEN
    )
