"""`gate_named`: a named model's plan, less the connections resting or disabled right now.

A named model's candidates are fixed (one per connection, in the order resolution gave), so
its plan is built once per name. What changes per request is each connection's state: one
an operator disabled, one cooling down after a 429 and one whose breaker is open are
skipped, so a spent plan is not asked again on every request; so is one whose plan's terms
do not allow the request's client. When every connection is left out, the plan has no
candidates and its `earliest_reset` says when the first resting one can serve again (None
when none rests).

Several plan accounts of one pool serving the name are ordered as the ladder orders a
pool (`routing/pools.py`): by the strategy, the session's pinned connection first while it
is kept. Each pool keeps the positions its accounts held, so nothing else moves.
"""

from __future__ import annotations

from collections.abc import Mapping

from rungway.routing.gates import resting_verdict
from rungway.routing.plan import Candidate, RoutePlan, Skip, SkipReason
from rungway.routing.pools import PoolOrder, decision_order
from rungway.routing.settings import PoolStrategyName
from rungway.routing.snapshot import BreakerState, ConnectionState, Roster

_RESTING = (SkipReason.COOLDOWN, SkipReason.BREAKER_OPEN)
_NONE: Mapping[str, Skip] = {}


def gate_named(
    plan: RoutePlan,
    states: Mapping[str, ConnectionState],
    now: float,
    kept_off: Mapping[str, Skip] = _NONE,
    *,
    strategy: PoolStrategyName = "fill_first",
    pinned: str | None = None,
    roster: Roster | None = None,
) -> RoutePlan:
    """`plan` itself when every connection may serve in the order it holds, else the plan
    without the others and with its pools in order.

    `kept_off` holds the connections the request's client may not use (their terms, their
    bound client key), each with its skip (`routing.terms.TermsGate`). `strategy`,
    `pinned` and `roster` order the pools as the ladder does; without `roster` the plan's
    connections are taken for one pool."""
    resting = any(
        c.connection_ids[0] in kept_off or _resting(states.get(c.connection_ids[0]), now)
        for c in plan.candidates
    )
    # One connection, or no pin and no plan pool to order: nothing is built to find that.
    pools = (
        decision_order(strategy, states, now, roster, pinned) if len(plan.candidates) > 1 else None
    )
    if not resting and pools is None:
        return plan
    kept = list(plan.candidates)
    skipped = list(plan.skipped)
    if resting:
        kept = _gated(plan, states, now, kept_off, skipped)
    if pools is not None:
        kept = _in_pool_order(kept, pools, pinned)
    honoured = pinned if any(c.connection_ids[0] == pinned for c in kept) else None
    if not resting and honoured is None and kept == list(plan.candidates):
        return plan
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
        pinned=honoured,
    )


def _gated(
    plan: RoutePlan,
    states: Mapping[str, ConnectionState],
    now: float,
    kept_off: Mapping[str, Skip],
    skipped: list[Skip],
) -> list[Candidate]:
    """The candidates that may serve; the others' skips are added to `skipped`."""
    kept = []
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
    return kept


def _in_pool_order(
    candidates: list[Candidate], pools: PoolOrder, pinned: str | None
) -> list[Candidate]:
    """The one-connection candidates with each model's pools ordered as the ladder's."""
    by_model: dict[str, list[int]] = {}
    for at, candidate in enumerate(candidates):
        by_model.setdefault(candidate.model, []).append(at)
    ordered = list(candidates)
    for model, held in by_model.items():
        ids = tuple(candidates[at].connection_ids[0] for at in held)
        if len(ids) < 2:
            continue
        ranked = pools.order(ids, pinned, model)
        if ranked == ids:
            continue
        by_id = {candidates[at].connection_ids[0]: candidates[at] for at in held}
        for at, connection_id in zip(held, ranked, strict=True):
            ordered[at] = by_id[connection_id]
    return ordered


def _resting(state: ConnectionState | None, now: float) -> bool:
    # The common case, a connection with no state or a healthy one, decided without a Verdict.
    return state is not None and (
        state.disabled
        or (state.cooldown_until is not None and state.cooldown_until > now)
        or state.breaker is BreakerState.OPEN
    )
